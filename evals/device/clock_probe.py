"""Does a timing run keep the GPU at its clocks? Samples them while a command runs (device side).

Why: the verifier's strict timing (every call after a synchronisation, a cold L2, checks between the
calls) leaves the GPU idle between calls, and an H100 at rest sits at 345 MHz. If the SM clock does
not stay up under that pattern, every strict time is stretched alike (ratios hold) and a call's host
time weighs less in it than in a back-to-back loop (docs/timing.md). This samples the SM clock,
utilisation and power every 50 ms while the command runs and prints their distribution over the
samples where the GPU was busy.

    python3 -m evals.device.clock_probe -- python3 -m evals.device.verify_probe out/probe-conv

The samples go to $OUT/clocks.csv and the command's output to $OUT/command.log when $OUT is set.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

QUERY = "clocks.sm,clocks.max.sm,utilization.gpu,power.draw"
PERIOD_MS = 50


def summarise(lines: list[str]) -> dict[str, Any]:
    """The SM clock (MHz) over the busy samples (utilisation above 0) of nvidia-smi's CSV lines
    (`QUERY`, no header, no units); unparsable lines, such as a last one cut short, are skipped."""
    busy: list[tuple[float, float, float]] = []  # (clock, max clock, power)
    total = 0
    for line in lines:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4:
            continue
        try:
            clock, top, util, power = (float(f) for f in fields)
        except ValueError:
            continue
        total += 1
        if util > 0:
            busy.append((clock, top, power))
    if not busy:
        return {"samples": total, "busy": 0}
    clocks = [c for c, _, _ in busy]
    top = max(t for _, t, _ in busy)
    return {
        "samples": total,
        "busy": len(busy),
        "sm_mhz_min": min(clocks),
        "sm_mhz_median": statistics.median(clocks),
        "sm_mhz_max": max(clocks),
        "sm_mhz_top": top,
        "at_90pct_of_top": sum(c >= 0.9 * top for c in clocks) / len(clocks),
        "power_w_median": statistics.median(p for _, _, p in busy),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="clock-probe-"))
    out.mkdir(parents=True, exist_ok=True)
    samples = out / "clocks.csv"
    with samples.open("w") as sink:
        sampler = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", f"-lms={PERIOD_MS}"],
            stdout=sink, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            with (out / "command.log").open("w") as log:
                rc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
        finally:
            sampler.terminate()
            sampler.wait(timeout=10)
    summary = summarise(samples.read_text().splitlines())
    print(f"command exit {rc}; {summary}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
