"""Where a generated program's host time per call goes, beside eager's (device side, diagnosis).

Why: the strict timing loop synchronises before every call, so the GPU idles while the host issues
it, and the verification probe measured our level-1 programs issuing a call in ~47 us where eager
takes ~18 us: about 2% of a 1.4 ms kernel, the whole gap on the streaming problems (docs/timing.md).
This script loads each probe request's program and problem in one process, builds the program, and
prints per problem the median host microseconds of one forward (ours, eager) and, from cProfile
over the same calls, the functions where our forward spends its own time; at exit each convolution
extension prints the median host time of its call's phases (STITCH_CONV_HOST_TRACE lines).

    python -m evals.device.verify_probe --write out/probe [PROBLEM ...]     # CPU machine
    python3 -m evals.device.host_overhead out/probe                          # device machine

Untrusted code note: it runs the offline policy's own programs, on the device machine only, as the
GPU tests do; the graph never runs this.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import runpy
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CALLS = 200
TOP = 8


def host_us(fn: Any, inputs: list[Any], calls: int = CALLS) -> float:
    """Median host microseconds from the call to its return, the device idle before each call."""
    import torch

    times = []
    with torch.no_grad():
        for _ in range(calls):
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = fn(*inputs)
            times.append((time.perf_counter() - start) * 1e6)
            del out
    torch.cuda.synchronize()
    return statistics.median(times)


def back_to_back_ms(fn: Any, inputs: list[Any], calls: int = 20, warmup: int = 1) -> float:
    """Milliseconds per call of `calls` calls issued back to back between two events (after `warmup`
    calls): the device's time with the host's issue hidden behind it, for calls longer than their issue."""
    import torch

    with torch.no_grad():
        for _ in range(warmup):
            fn(*inputs)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            fn(*inputs)
        end.record()
        torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / calls


def top_functions(fn: Any, inputs: list[Any], calls: int = CALLS, top: int = TOP) -> str:
    """cProfile's functions by own time over `calls` forwards (its own overhead inflates all of them)."""
    import torch

    profiler = cProfile.Profile()
    with torch.no_grad():
        profiler.enable()
        for _ in range(calls):
            fn(*inputs)
        profiler.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


class TimedExtension:
    """Stands in for a program's `_ext` module: each extension call's host microseconds, summed, so a
    forward's host time splits into our C++ (and the libraries under it) and the Python around it."""

    def __init__(self, ext: Any) -> None:
        self._ext = ext
        self.seconds = 0.0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._ext, name)
        if not callable(fn):
            return fn

        def timed(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        return timed


def extension_share(
    program: dict[str, Any], fn: Any, inputs: list[Any], calls: int = CALLS
) -> dict[str, float]:
    """Per forward: host microseconds inside the program's extension calls, and how many calls."""
    import torch

    forward_globals = program["ModelNew"].forward.__globals__
    if "_ext" not in forward_globals:
        return {}
    timed = TimedExtension(forward_globals["_ext"])
    forward_globals["_ext"] = timed
    try:
        with torch.no_grad():
            for _ in range(calls):
                torch.cuda.synchronize()
                fn(*inputs)
        torch.cuda.synchronize()
    finally:
        forward_globals["_ext"] = timed._ext
    return {"ext_us": round(timed.seconds / calls * 1e6, 1), "ext_calls": round(timed.calls / calls, 1)}


def load(source: str, folder: Path, name: str) -> dict[str, Any]:
    path = folder / f"{name}.py"
    path.write_text(source)
    return runpy.run_path(str(path))


@dataclass
class Case:
    """One probe request loaded and warmed: the models as the strict harness builds them, on the GPU."""

    problem: str
    program: dict[str, Any]
    reference: Any
    candidate: Any
    inputs: list[Any]


def load_case(request_path: Path, scratch: Path) -> Case:
    """verify_probe's request: its problem and program loaded, seeded, built and called a few times (builds,
    searches, caches), with TF32 off as the strict harness pins it, so our own code paths run."""
    import torch

    request = json.loads(request_path.read_text())
    stem = request_path.stem.replace(".", "_")
    problem = load(request["problem_source"], scratch, f"problem_{stem}")
    program = load(request["candidate_source"], scratch, f"program_{stem}")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    init = problem["get_init_inputs"]()
    torch.manual_seed(0)
    reference = problem["Model"](*init).cuda()
    torch.manual_seed(0)
    candidate = program["ModelNew"](*init).cuda()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem["get_inputs"]()]
    host_us(candidate, inputs, 10)
    key = request_path.name.removesuffix(".request.json").replace("__", "/")
    return Case(key, program, reference, candidate, inputs)


def measure(request_path: Path, scratch: Path) -> dict[str, Any]:
    case = load_case(request_path, scratch)
    return {
        "problem": case.problem,
        "ours_us": round(host_us(case.candidate, case.inputs), 1),
        "eager_us": round(host_us(case.reference, case.inputs), 1),
        **extension_share(case.program, case.candidate, case.inputs),
        "profile": top_functions(case.candidate, case.inputs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m evals.device.host_overhead", description=__doc__.split("\n")[0]
    )
    parser.add_argument("folder", type=Path, help="verify_probe's folder of requests")
    args = parser.parse_args(argv)
    # the conv library's per-phase host times, printed at exit (codegen/emit/templates/conv.cuh)
    os.environ.setdefault("STITCHCUDA_CONV_HOST_TRACE", "1")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for path in sorted(args.folder.glob("*.request.json")):
            row = measure(path, Path(scratch))
            rows.append(row)
            print(
                f"== {row['problem']}: ours {row['ours_us']} us ({row.get('ext_us', '-')} us in "
                f"{row.get('ext_calls', '-')} extension calls), eager {row['eager_us']} us"
            )
            print(row["profile"], flush=True)
    print("| problem | ours host us | in extension calls us (calls) | eager host us |\n|---|---|---|---|")
    for row in rows:
        ext = f"{row.get('ext_us', '-')} ({row.get('ext_calls', '-')})"
        print(f"| {row['problem']} | {row['ours_us']} | {ext} | {row['eager_us']} |")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
