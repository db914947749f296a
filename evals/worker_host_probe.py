"""Does the verifier's worker slow a forward's Python? Host time per call, in the worker and in a plain process.

    python -m evals.worker_host_probe [--trials 400]       # CPU machine, about 20 s

Why: on the device machines our generated forwards take 51-140 us from the start event to the call's
return inside the verifier, against about 25 us in a plain process (docs/benchmarks.md, fifteenth
session), while eager's grows far less. This separates the worker (sandbox, audit hooks, guards,
interleaved rounds) from the CUDA side: it verifies, on the CPU, a candidate whose forward runs the same
Python as a generated single-group program (`contiguous`, the shape tuple, `torch.empty`, `data_ptr`,
the launch table, the stream getter) around one torch op, against eager's one op, and times the same
two modules in this process. CPU timing in the worker is the whole call, so the two numbers compare.
"""

from __future__ import annotations

import argparse
import runpy
import statistics
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import torch

from tools.evaluate import evaluate
from tools.protocol import EvalRequest

PROBLEM = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)

    def get_inputs():
        return [torch.randn(64)]

    def get_init_inputs():
        return []
    """
)

# A generated single-group program's forward (codegen/emit), its extension call replaced by a torch op;
# its stream getter is codegen/emit/runtime.py's `_stitch_stream` but for a CPU tensor's answer (the
# generated one asks torch.cuda for the current stream, which a CPU-only machine has not got).
CANDIDATE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    STITCH_LAUNCH = {"g1": {"unroll": 1, "threads": 256}}

    def _stitch_stream(t):
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None and t.is_cuda:
            return int(raw(t.get_device()))
        return 0

    def _g1(a0, launch):
        f0 = a0.contiguous()
        shape = tuple(f0.shape)
        o0 = torch.empty(shape, device=f0.device, dtype=torch.float32)
        _ = (f0.data_ptr(), o0.data_ptr(), o0.numel(), launch["unroll"], launch["threads"], _stitch_stream(o0))
        torch.clamp_min(f0, 0.0, out=o0)
        return o0

    class ModelNew(nn.Module):
        def forward(self, x):
            return _g1(x, STITCH_LAUNCH["g1"])
    """
)


def _plain_us(fn: Any, x: torch.Tensor, calls: int) -> float:
    times = []
    with torch.no_grad():
        for _ in range(calls):
            start = time.perf_counter()
            fn(x)
            times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.worker_host_probe", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--trials", type=int, default=400, help="timed calls per contestant in the worker")
    args = parser.parse_args(argv)
    print("| where | ours us (median) | eager us (median) |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for run in (1, 2):
            request = EvalRequest(
                action="verify",
                problem_name="relu_host_probe",
                problem_source=PROBLEM,
                candidate_source=CANDIDATE,
                device="cpu",
                perf_trials=args.trials,
                cache_dir=str(folder / f"cache{run}"),
            )
            response = evaluate(request, timeout_s=300)
            if response["status"] != "passed":
                print(f"| worker run {run} | {response['status']}: {response['message'][:120]} | |")
                return 1
            timing = response["timing"]
            ours, eager = timing["candidate"]["median_ms"] * 1e3, timing["eager"]["median_ms"] * 1e3
            print(f"| worker, run {run} | {ours:.1f} | {eager:.1f} |")
        (folder / "candidate.py").write_text(CANDIDATE)
        (folder / "problem.py").write_text(PROBLEM)
        ours_fn = runpy.run_path(str(folder / "candidate.py"))["ModelNew"]()
        eager_fn = runpy.run_path(str(folder / "problem.py"))["Model"]()
    x = torch.randn(64)
    print(f"| plain process | {_plain_us(ours_fn, x, 2000):.1f} | {_plain_us(eager_fn, x, 2000):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
