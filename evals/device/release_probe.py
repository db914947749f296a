"""After a neighbour lets go of GPU memory, how long does a memory-bound timing stay slow? (issue 12)

Measured (evals.device.placement_probe, nineteenth session, H100): a neighbour allocating and freeing
2 GiB in a loop slowed eager 8.5-15% on three memory-bound problems, and the timing that followed its
death was 1.4-12.9% slower than the same process's first on three of six. If the driver's work after a
release (unmapping, scrubbing the freed memory) outlasts the process, the quiet window must wait that
long after a GPU process exits, not only while it exits. This probe draws the curve: in one process,
consecutive rounds of synchronised calls of a problem's eager forward (events around each call), timed
with no neighbour (`quiet`), right after a neighbour holding GIB of written memory was killed (`exit`),
and right after a live neighbour freed it (`free`); each round's mean over the quiet mean, averaged
into buckets of time since the release.

    python3 -m evals.device.release_probe [--rounds 150] [--gib 2] [--trials 2] [PROBLEM.py ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from evals.device.placement_probe import DRIVER_NEIGHBOUR, eager_setup, problem_paths

DEFAULT_PROBLEMS = ("level1/1_ReLU.py", "level1/30_GroupNorm.py", "level1/7_MaxReduction.py")
BUCKETS_S = (0.05, 0.2, 0.5, 1.0, 2.0, 4.0)  # upper edges; the last bucket is everything later
CALLS = 10  # synchronised calls a round

# The neighbour: holds GIB of written device memory (driver API through ctypes, no torch), prints
# "ready"; on the line "free" frees it and prints "freed", then waits to be killed.
NEIGHBOUR = (
    DRIVER_NEIGHBOUR
    + """
size = ctypes.c_size_t(int(float(sys.argv[1]) * (1 << 30)))
assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), size) == 0
assert cuda.cuMemsetD8_v2(ptr, ctypes.c_ubyte(1), size) == 0 and cuda.cuCtxSynchronize() == 0
print("ready", flush=True)
if sys.stdin.readline().strip() == "free":
    assert cuda.cuMemFree_v2(ptr) == 0 and cuda.cuCtxSynchronize() == 0
    print("freed", flush=True)
sys.stdin.readline()
"""
)


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.0f}s"


def bucket_label(index: int) -> str:
    """The time range of bucket `index` since the release, e.g. "50ms-200ms" or ">4s"."""
    low = 0.0 if index == 0 else BUCKETS_S[index - 1]
    if index < len(BUCKETS_S):
        return f"{_seconds(low)}-{_seconds(BUCKETS_S[index])}"
    return f">{_seconds(low)}"


def bucketed(curve: list[tuple[float, float]], quiet_ms: float) -> list[float | None]:
    """Mean of (round mean / quiet_ms) per bucket of time since the release (None: no round there)."""
    sums: list[list[float]] = [[] for _ in range(len(BUCKETS_S) + 1)]
    for since_s, mean_ms in curve:
        index = next((i for i, edge in enumerate(BUCKETS_S) if since_s < edge), len(BUCKETS_S))
        sums[index].append(mean_ms / quiet_ms)
    return [statistics.fmean(values) if values else None for values in sums]


def rounds_after(model: Any, inputs: list[Any], rounds: int, since: float) -> list[tuple[float, float]]:
    """(seconds since `since` at the round's start, mean ms of its synchronised calls) per round."""
    import torch

    curve = []
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(CALLS)
    ]
    with torch.no_grad():
        for _ in range(rounds):
            start = time.perf_counter() - since
            for begin, end in events:
                torch.cuda.synchronize()
                begin.record()
                model(*inputs)
                end.record()
            torch.cuda.synchronize()
            curve.append((start, statistics.fmean(b.elapsed_time(e) for b, e in events)))
    return curve


def released(kind: str, gib: float) -> tuple[subprocess.Popen[str], float]:
    """A neighbour holding `gib` GiB, then released (`exit`: killed and reaped; `free`: freed, alive);
    returns it and the moment of the release."""
    neighbour = subprocess.Popen(
        [sys.executable, "-c", NEIGHBOUR, str(gib)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert neighbour.stdin is not None and neighbour.stdout is not None
    if neighbour.stdout.readline().strip() != "ready":
        neighbour.kill()
        raise RuntimeError("the neighbour did not start (no CUDA driver, or no room for its memory?)")
    time.sleep(0.5)  # its allocation's own aftermath passes first
    if kind == "exit":
        neighbour.kill()
        neighbour.wait()
    else:
        neighbour.stdin.write("free\n")
        neighbour.stdin.flush()
        if neighbour.stdout.readline().strip() != "freed":
            raise RuntimeError("the neighbour did not free its memory")
    return neighbour, time.perf_counter()


def measure(path: Path, rounds: int, gib: float, trials: int) -> dict[str, Any]:
    """The problem's curves: quiet (no neighbour), then exit and free, alternating `trials` times."""
    model, inputs, _ = eager_setup(path)
    rounds_after(model, inputs, 5, time.perf_counter())  # warm-up
    curves: dict[str, list[tuple[float, float]]] = {"quiet": [], "exit": [], "free": []}
    for _ in range(trials):
        curves["quiet"] += rounds_after(model, inputs, rounds, time.perf_counter())
        for kind in ("exit", "free"):
            neighbour, moment = released(kind, gib)
            try:
                curves[kind] += rounds_after(model, inputs, rounds, moment)
            finally:
                neighbour.kill()
                neighbour.wait()
            time.sleep(2.0)  # the kill's own aftermath
    quiet_ms = statistics.fmean(mean for _, mean in curves["quiet"])
    return {
        "problem": path.stem,
        "quiet_ms": quiet_ms,
        "buckets": {kind: bucketed(curve, quiet_ms) for kind, curve in curves.items()},
        "curves": curves,
    }


def table(rows: list[dict[str, Any]]) -> str:
    labels = [bucket_label(i) for i in range(len(BUCKETS_S) + 1)]
    lines = ["| problem | quiet ms | after | " + " | ".join(labels) + " |", "|---" * (len(labels) + 3) + "|"]
    for row in rows:
        for kind in ("exit", "free", "quiet"):
            cells = ["-" if v is None else f"{v:.3f}" for v in row["buckets"][kind]]
            lines.append(f"| {row['problem']} | {row['quiet_ms']:.3f} | {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m evals.device.release_probe", description=__doc__.split("\n")[0]
    )
    parser.add_argument("problems", nargs="*", type=Path, help="problem files (default: three of the suite)")
    parser.add_argument("--rounds", type=int, default=150, help=f"rounds of {CALLS} calls after each release")
    parser.add_argument("--gib", type=float, default=2.0, help="device memory the neighbour holds (GiB)")
    parser.add_argument("--trials", type=int, default=2, help="releases of each kind per problem")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.trials < 1 or args.gib <= 0:
        parser.error("--rounds, --trials and --gib must be positive")
    import torch

    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU (the neighbour's memory and the timed calls live there)")
    paths = problem_paths(parser, args.problems, DEFAULT_PROBLEMS)
    rows = []
    for path in paths:
        rows.append(measure(path, args.rounds, args.gib, args.trials))
        print(json.dumps(rows[-1]), flush=True)
    print(table([{k: v for k, v in row.items() if k != "curves"} for row in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
