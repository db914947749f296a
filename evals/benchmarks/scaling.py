"""Suite wall time against the number of GPUs, modelled from an eval's per-problem breakdown.

    python -m evals.benchmarks.scaling RUN/results.jsonl [--gpus 1,2,4,8,16] [--jobs 12 | --ray-gpus-per-task 1]
                                       [--problems 250] [--slices RUN.slices.jsonl]

Why: until a machine with several GPUs is lent, the question "how long would the suite take on G
GPUs" can only be answered on paper, but the paper should start from measured seconds. Each
record's breakdown (evals.breakdown) splits a problem's wall time into three kinds of work:

- quiet: the timing itself (`timing_s`, and the baselines' timing when they are measured). It holds
  the machine-wide quiet window, so on one node it runs one problem at a time, whatever the GPUs;
- device: correctness and profiling (`correctness_s`, `profile_s`): one problem per GPU at a time
  (the worker's device lock, one per physical GPU: tools.worker.gpu_lock);
- cpu: trace, plan, build, everything else (`other_s`: process start, graph, coder) and the
  baselines' compilation: `jobs` problems at once per GPU (the CPU cores are not modelled).

`jobs` is how many problems run at once on one GPU. The default, 12, is the local executor's
`--jobs 12` on its one GPU. The Ray executor runs 1/`--ray-gpus-per-task` problems per GPU: its
default (1) runs ONE problem per GPU, which is `--ray-gpus-per-task 1` here (or `--jobs 1`), and
`stitchcuda eval --executor ray --ray-gpus-per-task 0.08` packs twelve, as the default assumes.

The model is the usual bottleneck bound: the wall time is the largest of (quiet seconds per node),
(quiet + device seconds per GPU), (all seconds per job slot) and the longest single problem. Two
layouts are shown: G nodes of one GPU each (Ray over a cluster: quiet windows in parallel) and one
node of G GPUs (its quiet window is shared, so timing does not scale there; its correctness trials
and profiles do, one device lock per GPU). Lock and window waits (`wait_s`) are not work and are left
out. Records without a breakdown (runs before it existed) are skipped, and the output says how many.

The measured suite wall printed beside the model: with `--slices` (the slice log of
evals/device/timing_suite.sh) the sum of the slices' eval spans, which leaves out the time between
slices (other calls, a machine's start) but counts each slice's start and the work a slice's end cut
off; without it, the union of the records' own run intervals (from `started_at` to `finished_at`),
which leaves out the gaps between slices and also the work of runs that a slice cut and the next
redid. The span from the first start to the last finish is printed too, for an eval that ran in
one go; for a sliced one it counts the gaps. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
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


def union_seconds(intervals: Sequence[tuple[float, float]]) -> float:
    """Seconds covered by at least one of the intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def slice_seconds(path: Path) -> tuple[float, int]:
    """(the sum of the slices' eval spans, how many slices) from a timing_suite.sh slice log."""
    spans = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
            spans.append(float(entry["end"]) - float(entry["start"]))
        except (ValueError, KeyError, TypeError):
            continue
    return sum(spans), len(spans)


def measured_wall(records: Sequence[dict[str, Any]], slices: Path | None) -> list[str]:
    """The lines that say how long the measured eval took, each naming what it counts."""
    count = max(1, len(records))
    lines = []
    if slices is not None and slices.is_file():
        wall, n = slice_seconds(slices)
        lines.append(
            f"suite wall {wall / 60:.1f} min ({wall / count:.1f} s/problem): the sum of {n} slices' spans"
        )
    intervals = [
        (float(r["started_at"]), float(r["finished_at"]))
        for r in records
        if r.get("started_at") is not None and r.get("finished_at") is not None
    ]
    if intervals:
        busy = union_seconds(intervals)
        span = max(end for _, end in intervals) - min(start for start, _ in intervals)
        lines.append(
            f"runs in flight {busy / 60:.1f} min ({busy / count:.1f} s/problem): the union of the records' "
            "run intervals (no gaps between slices, no work a slice's end cut off)"
        )
        lines.append(f"first start to last finish {span / 60:.1f} min (for a sliced eval: gaps included)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.benchmarks.scaling", description=__doc__.split("\n")[0]
    )
    parser.add_argument("results", type=Path, help="an eval's results.jsonl")
    parser.add_argument("--gpus", default="1,2,4,8,16", help="GPU counts to model")
    parser.add_argument(
        "--jobs", type=int, default=12, help="problems at once per GPU (default 12: the local --jobs 12)"
    )
    parser.add_argument(
        "--ray-gpus-per-task",
        type=float,
        default=None,
        help="model the Ray executor with this --ray-gpus-per-task (1: one problem per GPU, Ray's default)",
    )
    parser.add_argument("--problems", type=int, default=None, help="model this many problems of the same mix")
    parser.add_argument("--measured-baselines", action="store_true", help="count baselines (default: cached)")
    parser.add_argument("--slices", type=Path, default=None, help="the eval's slice log (timing_suite.sh)")
    args = parser.parse_args(argv)
    if not args.results.is_file():
        print(f"scaling: {args.results}: no such file", file=sys.stderr)
        return 2
    jobs = args.jobs
    if args.ray_gpus_per_task is not None:
        if args.ray_gpus_per_task <= 0:
            print("scaling: --ray-gpus-per-task must be positive", file=sys.stderr)
            return 2
        jobs = max(1, math.floor(1 / args.ray_gpus_per_task + 1e-9))  # Ray packs whole tasks into a GPU
    records = list(read_records(args.results).values())
    found = [problem_load(r, baselines_cached=not args.measured_baselines) for r in records]
    loads = [load for load in found if load is not None]
    with_breakdown = len(loads)
    print(f"measured: {len(records)} records in {args.results}, {with_breakdown} with a breakdown", end="")
    print(f"; summed problem time {sum(load.total for load in loads) / 60:.1f} min")
    for line in measured_wall(records, args.slices):
        print(f"measured: {line}")
    if not loads:
        print("no record has a breakdown: nothing to model (run the suite with this version first)")
        return 1
    if with_breakdown < len(records):
        print(f"note: {len(records) - with_breakdown} records without a breakdown are left out")
    if args.problems:
        loads = scale(loads, args.problems)
    gpus = [int(g) for g in args.gpus.split(",") if g.strip()]
    how = (
        f"--ray-gpus-per-task {args.ray_gpus_per_task:g}: {jobs} problem(s) per GPU"
        if args.ray_gpus_per_task is not None
        else f"{jobs} problems at once per GPU (Ray's default runs 1: --ray-gpus-per-task 1)"
    )
    print(f"modelled ({'measured' if args.measured_baselines else 'cached'} baselines, {how}):")
    print(table(loads, gpus, jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
