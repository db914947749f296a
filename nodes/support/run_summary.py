"""What a run's report shows beyond its tables: the iteration trajectory, the time split, the kernel roofline.

Why one module: report.md (finalize) and its HTML twin (evals.report.run_page) must tell the same story
from the same figures, so both read them from here. Plain data from report.json and the profile
reports the profiler node writes (out_dir/profiles/candidate-N.json); standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TIME_PARTS = ("build", "correctness", "timing", "profiling", "other checks", "planning and coding")


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def trajectory(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per candidate: its turn (write, fix, optimize), outcome, time, and whether it is the best."""
    best = report.get("candidate_id") if report.get("status") == "verified" else None
    rows = []
    for attempt in report.get("attempts") or []:
        rows.append(
            {
                "candidate": attempt.get("candidate"),
                "mode": attempt.get("mode"),
                "status": attempt.get("status"),
                "verdict": attempt.get("verdict"),
                "candidate_ms": attempt.get("candidate_ms"),
                "speedup_vs_eager": attempt.get("speedup_vs_eager"),
                "build_s": _float(attempt.get("build_seconds")),
                "eval_s": _float(attempt.get("eval_seconds")),
                "best": best is not None and attempt.get("candidate") == best,
                "summary": attempt.get("summary") or "",
            }
        )
    return rows


def outcome_text(row: dict[str, Any]) -> str:
    """'passed', 'passed (suspicious)', 'build_error': a verdict means something only for a program that ran."""
    verdict = row.get("verdict")
    shown = row.get("status") == "passed" and verdict not in (None, "clean")
    return str(row.get("status")) + (f" ({verdict})" if shown else "")


def best_origin(report: dict[str, Any]) -> str:
    """Where the reported program came from, in one line."""
    rows = trajectory(report)
    best = next((r for r in rows if r["best"]), None)
    if best is None:
        return "no candidate verified"
    turns = {"write": "the first write", "fix": "a fix turn", "optimize": "an optimisation turn"}
    origin = turns.get(str(best["mode"]), str(best["mode"]))
    speed = best["speedup_vs_eager"]
    text = f"candidate {best['candidate']} of {len(rows)}, from {origin}"
    return text + (f", {speed:.2f}x vs eager" if isinstance(speed, int | float) else "")


def time_split(report: dict[str, Any]) -> dict[str, float]:
    """Seconds of the run in build, correctness, timing, profiling, other checks, planning and coding.

    Build, correctness and timing come from each candidate's worker phases; profiling is the profiler
    node plus the hack checks' profiling pass; the verifier's remaining time (loading, imports, the
    device lock) is 'other checks'; planner and coder nodes are 'planning and coding'.
    """
    split = dict.fromkeys(TIME_PARTS, 0.0)
    for attempt in report.get("attempts") or []:
        phases = attempt.get("phases") or {}
        split["build"] += _float(attempt.get("build_seconds"))
        for phase, seconds in phases.items():
            if phase == "checking correctness":
                split["correctness"] += _float(seconds)
            elif phase.startswith("timing ") or phase == "drawing the timing inputs":
                split["timing"] += _float(seconds)
            elif phase.startswith("profiling"):
                split["profiling"] += _float(seconds)
    nodes = report.get("node_seconds") or {}
    verifier = _float(nodes.get("verifier"))
    counted = split["build"] + split["correctness"] + split["timing"] + split["profiling"]
    split["other checks"] = max(0.0, verifier - counted)
    split["profiling"] += _float(nodes.get("profiler"))
    split["planning and coding"] = _float(nodes.get("planner")) + _float(nodes.get("coder"))
    return {k: round(v, 3) for k, v in split.items()}


# ----------------------------------------------------------------------------------------------
# Kernel roofline from the NCU records
# ----------------------------------------------------------------------------------------------


def profile_report(out_dir: str | Path, candidate: int | None) -> dict[str, Any] | None:
    """The profiler node's report of `candidate` (else of the last profiled one), None when there is none."""
    folder = Path(out_dir) / "profiles"
    paths = sorted(folder.glob("candidate-*.json"), key=lambda p: int(p.stem.split("-")[-1] or 0))
    chosen = folder / f"candidate-{candidate}.json"
    path = chosen if candidate is not None and chosen.exists() else (paths[-1] if paths else None)
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def kernel_roofline(profile: dict[str, Any] | None) -> dict[str, Any] | None:
    """Per kernel (launches of one name summed): FLOPs, DRAM bytes, time, intensity, achieved FLOP/s.

    None without NCU kernel records. A kernel whose record has no FLOP counts (an older metric set)
    keeps its bytes and time but no roofline position.
    """
    ncu = (profile or {}).get("ncu") or {}
    kernels = ncu.get("kernels") or []
    if not kernels:
        return None
    from tools.profilers.ncu_records import KernelMetrics
    from tools.roofline import classify_kernel

    groups: dict[str, dict[str, Any]] = {}
    for raw in kernels:
        record = KernelMetrics.from_dict(raw)
        entry = groups.setdefault(
            record.base_name or record.name,
            {"name": record.base_name or record.name, "launches": 0, "flops": None, "bytes": None, "ns": 0.0},
        )
        entry["launches"] += 1
        entry["ns"] += record.duration_ns or 0.0
        if record.fp32_flops is not None:
            entry["flops"] = (entry["flops"] or 0.0) + record.fp32_flops
        if record.dram_bytes is not None:
            entry["bytes"] = (entry["bytes"] or 0.0) + record.dram_bytes
        entry.setdefault("bound", classify_kernel(record)[0])
    rows = []
    for entry in groups.values():
        seconds = entry["ns"] / 1e9
        flops, nbytes = entry["flops"], entry["bytes"]
        entry["intensity"] = flops / nbytes if flops is not None and nbytes else None
        entry["flop_per_s"] = flops / seconds if flops is not None and seconds > 0 else None
        entry["byte_per_s"] = nbytes / seconds if nbytes is not None and seconds > 0 else None
        rows.append(entry)
    rows.sort(key=lambda e: -e["ns"])
    return {"ceilings": (profile or {}).get("ceilings"), "kernels": rows}


# ----------------------------------------------------------------------------------------------
# Markdown
# ----------------------------------------------------------------------------------------------


def _fmt(value: Any, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"


def markdown_sections(report: dict[str, Any]) -> list[str]:
    """The trajectory, time split and kernel roofline sections of report.md."""
    lines = ["", "## Trajectory", "", f"Best program: {best_origin(report)}.", ""]
    lines += ["| candidate | turn | outcome | ms | vs eager | build s | check s | best | summary |"]
    lines += ["|---|---|---|---|---|---|---|---|---|"]
    for row in trajectory(report):
        outcome = outcome_text(row)
        lines.append(
            f"| {row['candidate']} | {row['mode']} | {outcome} | {_fmt(row['candidate_ms'], '.3f')} | "
            f"{_fmt(row['speedup_vs_eager'], '.2f')} | {row['build_s']:.1f} | {row['eval_s']:.1f} | "
            f"{'**best**' if row['best'] else ''} | {row['summary'].replace('|', '/')} |"
        )
    split = time_split(report)
    total = sum(split.values())
    lines += ["", "## Time split", "", "| part | s | share |", "|---|---|---|"]
    for part, seconds in split.items():
        lines.append(
            f"| {part} | {seconds:.1f} | {seconds / total:.0%} |" if total else f"| {part} | 0.0 | - |"
        )
    roofline = report.get("kernel_roofline")
    if roofline:
        lines += ["", "## Kernel roofline (Nsight Compute)", ""]
        lines += ["| kernel | launches | us | GFLOP | MB DRAM | FLOP/B | GFLOP/s | GB/s | bound |"]
        lines += ["|---|---|---|---|---|---|---|---|---|"]
        for k in roofline["kernels"]:
            gflop = k["flops"] / 1e9 if k["flops"] is not None else None
            mbytes = k["bytes"] / 1e6 if k["bytes"] is not None else None
            rate = k["flop_per_s"] / 1e9 if k["flop_per_s"] is not None else None
            bandwidth = k["byte_per_s"] / 1e9 if k["byte_per_s"] is not None else None
            lines.append(
                f"| {k['name']} | {k['launches']} | {k['ns'] / 1e3:.1f} | {_fmt(gflop, '.3g')} | "
                f"{_fmt(mbytes, '.4g')} | {_fmt(k['intensity'], '.3g')} | {_fmt(rate, '.4g')} | "
                f"{_fmt(bandwidth, '.4g')} | {k['bound']} |"
            )
    return lines
