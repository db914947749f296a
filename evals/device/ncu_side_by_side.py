"""Nsight Compute counters of eager's, our and torch.compile's kernels for the same problems, one table.

    CPU:    python -m evals.device.prepare_profiles --no-synthetic --out out/ncu-sbs --problems P ...
    device: python3 -m evals.device.ncu_side_by_side out/ncu-sbs [--compile default] [--budget-s 400]

Why: a ratio says who is faster, not why. Where torch.compile beats our kernel (the pools on the
H200), the counters of both kernels side by side (DRAM throughput, issue activity, occupancy,
registers, the leading warp stalls, load sectors a request) show whether ours is bound by memory,
by issue or by latency, and which of those compile's kernel avoids. One ncu run per side
(`--nvtx-include measure/SIDE/`, evals/device/ncu_compare.py's ranges): warm-ups and torch.compile's
compilation stay outside the counters. Prints the table last; raw CSVs under --keep.
Needs only torch and the standard library (the GPU machine's image).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from tools.profilers.ncu import export_command, find_ncu, profile_command, query_metrics, select_metrics
from tools.profilers.ncu_records import EXTRA_METRICS, KernelMetrics, parse_records

SIDES = ("reference", "candidate", "compiled")
LAUNCH_COUNT = 20  # kernels a side, at most (a problem's forward launches a few)
COMPARE = Path(__file__).resolve().parent / "ncu_compare.py"


def ncu_command(ncu: str, side: str, metrics: list[str], report: Path, target: list[str]) -> list[str]:
    """tools.profilers.ncu's command line, its counters taken inside the side's NVTX range only."""
    return profile_command(ncu, report, metrics, LAUNCH_COUNT, target, nvtx_include=f"measure/{side}/")


def profile_side(
    ncu: str, folder: Path, side: str, compile_mode: str, metrics: list[str], keep: Path
) -> list[KernelMetrics]:
    """The kernels of one side of one problem (empty when ncu profiled none; its log says why)."""
    keep.mkdir(parents=True, exist_ok=True)
    report = keep / f"{folder.name}.{side}.ncu-rep"
    target = [sys.executable, str(COMPARE), str(folder / "problem.py"), str(folder / "candidate.py")]
    if side == "compiled":
        target.append(compile_mode)
    run = subprocess.run(
        ncu_command(ncu, side, metrics, report, target), capture_output=True, text=True, timeout=300
    )
    (keep / f"{folder.name}.{side}.log").write_text(run.stdout[-20000:] + run.stderr[-20000:])
    if not report.exists():
        return []
    raw = subprocess.run(export_command(ncu, report), capture_output=True, text=True, timeout=120).stdout
    (keep / f"{folder.name}.{side}.raw.csv").write_text(raw)
    return parse_records(raw)


def row(problem: str, side: str, k: KernelMetrics) -> str:
    """One table row: where the kernel's time goes, in the counters a diagnosis reads first."""
    moved = (k.dram_bytes_read or 0.0) + (k.dram_bytes_write or 0.0)
    gbs = moved / k.duration_ns if k.duration_ns else 0.0  # bytes per ns = GB/s
    stalls = sorted(k.stalls.items(), key=lambda item: -item[1])[:3]
    sectors = (
        k.global_load_sectors / k.global_load_requests
        if k.global_load_sectors and k.global_load_requests
        else 0.0
    )
    cells = [
        problem,
        side,
        k.base_name[:40],
        f"{(k.duration_ns or 0) / 1e3:.1f}",
        f"{gbs:.0f}",
        f"{k.dram_throughput_pct or 0:.0f}",
        f"{k.issue_active_pct or 0:.0f}",
        f"{k.achieved_occupancy_pct or 0:.0f}",
        f"{k.registers_per_thread or 0:.0f}",
        f"{sectors:.1f}",
        " ".join(f"{name}:{value:.1f}" for name, value in stalls),
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m evals.device.ncu_side_by_side")
    parser.add_argument(
        "inputs", type=Path, help="prepare_profiles' folder (problem.py, candidate.py a problem)"
    )
    parser.add_argument("--compile", default="default", help="torch.compile mode of the third side")
    parser.add_argument("--budget-s", type=float, default=400.0, help="start no problem after this")
    parser.add_argument("--keep", type=Path, default=Path("/tmp/ncu-sbs"), help="reports, raw CSVs, logs")
    args = parser.parse_args(argv)
    ncu = find_ncu()
    if ncu is None:
        print("ncu not found")
        return 1
    metrics, dropped = select_metrics(EXTRA_METRICS, set(query_metrics(ncu)))
    if dropped:
        print("metrics this ncu lacks:", ", ".join(dropped))
    manifest = json.loads((args.inputs / "manifest.json").read_text())
    t0 = time.monotonic()
    lines = []
    for entry in manifest["entries"]:
        if time.monotonic() - t0 > args.budget_s:
            print(f"budget spent: {entry['problem']} and later not profiled")
            break
        folder = args.inputs / entry["key"]
        for side in SIDES:
            kernels = profile_side(ncu, folder, side, args.compile, metrics, args.keep)
            print(
                f"{entry['problem']} {side}: {len(kernels)} kernels ({time.monotonic() - t0:.0f} s)",
                flush=True,
            )
            lines += [row(entry["problem"], side, k) for k in kernels]
    print("| problem | side | kernel | us | GB/s | DRAM % | issue % | occ % | regs | sect/req | top stalls |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
