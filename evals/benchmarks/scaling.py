"""Suite wall time against the number of GPUs, modelled from an eval's per-problem breakdown.

    python -m evals.benchmarks.scaling RUN/results.jsonl [--gpus 1,2,4,8,16] [--jobs 12] [--problems 250]

Why: until a machine with several GPUs is lent, the question "how long would the suite take on G
GPUs" can only be answered on paper, but the paper should start from measured seconds. Each
record's breakdown (evals.breakdown) splits a problem's wall time into three kinds of work:

- quiet: the timing itself (`timing_s`, and the baselines' timing when they are measured). It holds
  the machine-wide quiet window, so on one node it runs one problem at a time, whatever the GPUs;
- device: correctness and profiling (`correctness_s`, `profile_s`): one problem per GPU at a time
  (the worker's per-device lock);
- cpu: trace, plan, build, everything else (`other_s`: process start, graph, coder) and the
  baselines' compilation: `jobs` problems at once per node.

The model is the usual bottleneck bound: the wall time is the largest of (quiet seconds per node),
(quiet + device seconds per GPU), (all seconds per job slot) and the longest single problem. Two
layouts are shown: G nodes of one GPU each (Ray over a cluster) and one node of G GPUs (whose
quiet window is shared, so timing does not scale there). Lock and window waits (`wait_s`) are not
work and are left out. Records without a breakdown (runs before it existed) are skipped, and the
output says how many. Standard library only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.benchmarks.agreement import read_records


@dataclass(frozen=True)
class Load:
    """Seconds of each kind of work in one problem."""

    quiet: float
    device: float
    cpu: float

    @property
    def total(self) -> float:
        return self.quiet + self.device + self.cpu


def problem_load(record: dict[str, Any], baselines_cached: bool) -> Load | None:
    """The problem's load (None for a record without a breakdown)."""
    steps = record.get("breakdown")
    if not steps:
        return None
    baselines = 0.0 if baselines_cached else float(steps.get("baselines_s") or 0.0)
    quiet = float(steps.get("timing_s") or 0.0) + baselines / 2  # a compile mode: half timing, half compile
    device = float(steps.get("correctness_s") or 0.0) + float(steps.get("profile_s") or 0.0)
    cpu = sum(float(steps.get(k) or 0.0) for k in ("trace_s", "plan_s", "build_s", "other_s")) + baselines / 2
    return Load(quiet, device, cpu)


def wall_time(loads: Sequence[Load], nodes: int, gpus_per_node: int, jobs: int) -> tuple[float, str]:
    """Modelled suite wall seconds and the binding resource."""
    bounds = {
        "quiet window": sum(load.quiet for load in loads) / nodes,
        "GPUs": sum(load.quiet + load.device for load in loads) / (nodes * gpus_per_node),
        "job slots": sum(load.total for load in loads) / (nodes * jobs),
        "longest problem": max((load.total for load in loads), default=0.0),
    }
    binding = max(bounds, key=lambda name: bounds[name])
    return bounds[binding], binding


def scale(loads: Sequence[Load], count: int) -> list[Load]:
    """The same mix of problems, `count` of them (the suite's loads repeated in order)."""
    if not loads:
        return []
    return [loads[i % len(loads)] for i in range(count)]


def table(loads: Sequence[Load], gpus: Sequence[int], jobs: int) -> str:
    lines = [
        f"| GPUs | {len(loads)} problems, G nodes x 1 GPU | bound | s/problem | 1 node x G GPUs | bound |",
        "|---|---|---|---|---|---|",
    ]
    for g in gpus:
        spread, spread_bound = wall_time(loads, g, 1, jobs)
        packed, packed_bound = wall_time(loads, 1, g, jobs * g)
        lines.append(
            f"| {g} | {spread / 60:.1f} min | {spread_bound} | {spread / max(1, len(loads)):.1f} | "
            f"{packed / 60:.1f} min | {packed_bound} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.benchmarks.scaling", description=__doc__.split("\n")[0]
    )
    parser.add_argument("results", type=Path, help="an eval's results.jsonl")
    parser.add_argument("--gpus", default="1,2,4,8,16", help="GPU counts to model")
    parser.add_argument(
        "--jobs", type=int, default=12, help="problems at once per GPU's worth of CPU (default 12)"
    )
    parser.add_argument("--problems", type=int, default=None, help="model this many problems of the same mix")
    parser.add_argument("--measured-baselines", action="store_true", help="count baselines (default: cached)")
    args = parser.parse_args(argv)
    if not args.results.is_file():
        print(f"scaling: {args.results}: no such file", file=sys.stderr)
        return 2
    records = list(read_records(args.results).values())
    found = [problem_load(r, baselines_cached=not args.measured_baselines) for r in records]
    loads = [load for load in found if load is not None]
    with_breakdown = len(loads)
    starts = [r["started_at"] for r in records if r.get("started_at")]
    ends = [r["finished_at"] for r in records if r.get("finished_at")]
    print(f"measured: {len(records)} records in {args.results}, {with_breakdown} with a breakdown", end="")
    if starts and ends:
        wall = max(ends) - min(starts)
        print(f"; suite wall {wall / 60:.1f} min ({wall / len(records):.1f} s/problem)", end="")
    print(f"; summed problem time {sum(load.total for load in loads) / 60:.1f} min")
    if not loads:
        print("no record has a breakdown: nothing to model (run the suite with this version first)")
        return 1
    if with_breakdown < len(records):
        print(f"note: {len(records) - with_breakdown} records without a breakdown are left out")
    if args.problems:
        loads = scale(loads, args.problems)
    gpus = [int(g) for g in args.gpus.split(",") if g.strip()]
    print(
        f"modelled ({'measured' if args.measured_baselines else 'cached'} baselines, {args.jobs} jobs per GPU):"
    )
    print(table(loads, gpus, args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
