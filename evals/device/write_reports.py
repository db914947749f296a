"""CPU side, after the GPU run: turn a capture's results.json into the reports under docs/profiles/.

    python -m evals.device.write_reports --capture DIR [--out docs/profiles]

DIR holds results.json (capture_profiles.py's; also inside capture.tar.gz as capture/results.json).
For every program and target the report shows the NCU records (one row per kernel, with its class),
the system summary (nsys, or the PyTorch profiler where nsys could not report), the time as % of
speed of light against the ceilings measured in the same run, and the Feedback the diagnosis gives
(bottleneck, evidence, ranked suggestions citing the guidance notes). The measured time is the
profiled wall time per forward (nsys, warm, 5 forwards), not the verifier's cold-L2 timing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from graph.artifacts import Feedback, Plan
from nodes import diagnosis
from nodes.support.evidence import profile_from_system
from tools.profilers.ncu import NcuResult, kernel_groups
from tools.roofline import Ceilings, classify_kernel, device_ceilings, speed_of_light

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "docs" / "profiles"


def load_results(capture: Path) -> dict[str, Any]:
    path = capture / "results.json" if capture.is_dir() else capture
    return json.loads(path.read_text())


def analyse_target(
    slot: dict[str, Any], plan: Plan | None, ceilings: Ceilings, retriever: diagnosis.Retriever | None = None
) -> dict[str, Any]:
    """Diagnosis and Feedback of one profiled target from its captured records."""
    system = slot.get("system")
    ncu = NcuResult.from_dict(slot["ncu"]) if slot.get("ncu") else None
    device = (system or {}).get("device") or (ncu.device if ncu else "") or ceilings.gpu
    evidence = diagnosis.Evidence(system=system, ncu=ncu, device=device)
    if system and system.get("status") == "ok":
        evidence.profile = profile_from_system(system)
    diagnosed = diagnosis.diagnose(evidence, plan=plan, ceilings=ceilings, precision="fp32")
    guidance = diagnosis.retrieve_guidance(diagnosed, retriever)
    feedback = diagnosis.feedback_from(diagnosed, guidance)
    return {"evidence": evidence, "diagnosis": diagnosed, "feedback": feedback}


def _cell(value: Any, fmt: str = "{:.3g}") -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return fmt.format(value)
    return str(value)


def kernel_rows(ncu: NcuResult | None, limit: int = 12) -> list[str]:
    if ncu is None or not ncu.ok:
        return [f"ncu: {ncu.status if ncu else 'not run'}: {ncu.reason if ncu else ''}"]
    rows = [
        "| kernel | calls | share | us/call | class | SM % | mem % | DRAM % | occ. ach/theo % | regs | smem/blk | L1 hit % | L2 hit % | ld sect/req | st sect/req | top stall | tensor % | branch unif. % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for group in kernel_groups(ncu.kernels)[:limit]:
        k = group["exemplar"]
        stalls = k.top_stalls(1)
        rows.append(
            "| "
            + " | ".join(
                [
                    f"`{group['base_name'][:48]}`",
                    str(group["calls"]),
                    f"{group['share']:.0%}",
                    _cell(group["total_ns"] / 1e3 / max(group["calls"], 1), "{:.4g}"),
                    classify_kernel(k)[0],
                    _cell(k.sm_throughput_pct, "{:.0f}"),
                    _cell(k.memory_throughput_pct, "{:.0f}"),
                    _cell(k.dram_throughput_pct, "{:.0f}"),
                    f"{_cell(k.achieved_occupancy_pct, '{:.0f}')}/{_cell(k.theoretical_occupancy_pct, '{:.0f}')}",
                    _cell(k.registers_per_thread, "{:.0f}"),
                    _cell(k.shared_mem_per_block, "{:.0f}"),
                    _cell(k.l1_hit_pct, "{:.0f}"),
                    _cell(k.l2_hit_pct, "{:.0f}"),
                    _cell(k.global_load_sectors_per_request, "{:.1f}"),
                    _cell(k.global_store_sectors_per_request, "{:.1f}"),
                    f"{stalls[0][0]} ({stalls[0][2]:.0%})" if stalls else "-",
                    _cell(k.tensor_pipe_pct, "{:.0f}"),
                    _cell(k.branch_uniformity_pct, "{:.0f}"),
                ]
            )
            + " |"
        )
    if ncu.truncated:
        rows.append(f"\n(ncu profiled the first {ncu.launch_count} kernel launches of the forward only.)")
    return rows


def system_rows(system: dict[str, Any] | None) -> list[str]:
    if not system:
        return ["system profile: not run"]
    if system.get("status") != "ok":
        return [
            f"system profile ({system.get('source')}): {system.get('status')}: {system.get('reason', '')}"
        ]
    gaps = system.get("launch_gaps", {})
    syncs = system.get("host_syncs", {})
    copies = system.get("copies", {})
    lines = [
        f"- source: {system['source']}" + (f" ({system['reason']})" if system.get("reason") else ""),
        f"- wall per forward: {system['wall_ms']:.4g} ms; GPU busy {system['gpu_busy_pct']:.1f}%; "
        f"device time {system['device_ms']:.4g} ms",
        f"- kernels per forward: {system['kernel_count']:g} ({system['kernel_ms']:.4g} ms); launch calls "
        f"{system.get('launch_calls', 0):g}, graph launches {system.get('graph_launches', 0):g}",
        f"- launch gaps per forward: {gaps.get('count', 0):g}, {gaps.get('total_ms', 0):.4g} ms in total, "
        f"median {gaps.get('median_us', 0):.3g} us, max {gaps.get('max_us', 0):.3g} us",
        f"- host syncs per forward: {syncs.get('count', 0):g} {syncs.get('calls', {}) or ''}",
        "- copies per forward: "
        + (
            ", ".join(
                f"{k} {v['count']:g}x {v['bytes'] / 1e6:.4g} MB {v['ms']:.3g} ms" for k, v in copies.items()
            )
            or "none"
        ),
        "- top kernels: "
        + "; ".join(
            f"`{k['name'][:60]}` {k['share']:.0%} ({k['total_ms']:.4g} ms)" for k in system["top_kernels"][:5]
        ),
    ]
    return lines


def speedup_cell(target: str, reference_ms: float | None, measured_ms: float | None) -> str:
    """Reference time / candidate time: both come from the same capture, so the ratio is side by side."""
    if target != "candidate" or not reference_ms or not measured_ms:
        return "-"
    return f"{reference_ms / measured_ms:.2f}x"


def feedback_rows(feedback: Feedback) -> list[str]:
    lines = [f"**{feedback.summary}**", "", "Suggestions, ranked:"]
    lines += [f"{i}. {s}" for i, s in enumerate(feedback.suggestions, 1)]
    lines += ["", f"Sources: {', '.join(feedback.sources) or 'none'}"]
    return lines


def write_reports(
    results: dict[str, Any], out: Path, retriever: diagnosis.Retriever | None = None
) -> list[Path]:
    """One Markdown and one JSON report per program, plus README.md with the index table."""
    out.mkdir(parents=True, exist_ok=True)
    measured = results.get("ceilings")
    ceilings = Ceilings.from_dict(measured) if measured else device_ceilings("NVIDIA H200")
    written: list[Path] = []
    index = [
        "| program | target | wall ms/fwd | vs reference | % of SOL | GPU busy % | kernels/fwd | bottleneck |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, entry in results.get("entries", {}).items():
        plan = Plan.model_validate(entry["plan"]) if entry.get("plan") else None
        sol = speed_of_light(plan.total_flops, plan.total_bytes, ceilings) if plan else None
        md = [f"# {entry.get('problem', key)}", ""]
        if sol is not None:
            md += [f"Speed of light on {ceilings.gpu} ({ceilings.source}): {sol.describe()}", ""]
        data: dict[str, Any] = {"problem": entry.get("problem"), "ceilings": ceilings.to_dict()}
        reference_ms: float | None = None
        for target in ("reference", "candidate"):
            slot = entry.get(target)
            if not slot:
                continue
            analysed = analyse_target(slot, plan, ceilings, retriever)
            diagnosed: diagnosis.Diagnosis = analysed["diagnosis"]
            feedback: Feedback = analysed["feedback"]
            ncu: NcuResult | None = analysed["evidence"].ncu
            system = slot.get("system")
            pct = diagnosed.pct_of_sol
            md += [f"## {target}", ""]
            md += [
                f"Time: {_cell(diagnosed.measured_ms, '{:.4g}')} ms per forward"
                + (f", {pct:.1f}% of SOL" if pct is not None else ""),
                "",
            ]
            md += ["### System (timeline)", "", *system_rows(system), ""]
            md += ["### Kernels (Nsight Compute)", "", *kernel_rows(ncu), ""]
            md += ["### Diagnosis", "", "```", diagnosed.text(), "```", ""]
            md += ["### Feedback", "", *feedback_rows(feedback), ""]
            data[target] = {
                "system": system,
                "ncu": ncu.to_dict() if ncu else None,
                "diagnosis": diagnosed.to_dict(),
                "feedback": feedback.dump(),
            }
            busy = (system or {}).get("gpu_busy_pct") if (system or {}).get("status") == "ok" else None
            kernels = (system or {}).get("kernel_count") if busy is not None else None
            if target == "reference":
                reference_ms = diagnosed.measured_ms
            index.append(
                f"| [{key}]({key}.md) | {target} | {_cell(diagnosed.measured_ms, '{:.4g}')} | "
                f"{speedup_cell(target, reference_ms, diagnosed.measured_ms)} | {_cell(pct, '{:.1f}')} | {_cell(busy, '{:.0f}')} | {_cell(kernels, '{:g}')} | "
                f"{diagnosed.top.rule if diagnosed.top else '-'} |"
            )
        (out / f"{key}.md").write_text("\n".join(md) + "\n")
        (out / f"{key}.json").write_text(json.dumps(data, indent=1, default=str))
        written += [out / f"{key}.md", out / f"{key}.json"]
    readme = [
        "# Profiles captured on the H200",
        "",
        "Written by `python -m evals.device.write_reports` from `evals/device/capture_profiles.sh` output "
        f"(ceilings: {ceilings.source}). See docs/profiling.md for what each number means.",
        "",
        "Times are profiled wall time per forward (5 warm forwards under Nsight Systems, or the PyTorch "
        "profiler), and *vs reference* is the reference's time over the candidate's from the same capture. "
        "They show where time goes, not the benchmark speedup: a profiler adds overhead, most of all to "
        "launch-bound programs. Timed speedups come from the harness (docs/benchmarks.md).",
        "",
        *index,
        "",
        f"Skipped jobs: {results.get('skipped') or 'none'}",
    ]
    (out / "README.md").write_text("\n".join(readme) + "\n")
    written.append(out / "README.md")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.device.write_reports", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--capture", required=True, help="folder with results.json (or the file itself)")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    written = write_reports(load_results(Path(args.capture)), Path(args.out))
    print("\n".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
