"""The program a profiler runs: build the candidate (or take the reference), run N forwards in a range.

    python -m tools.profile_target --problem P.py [--candidate C.py] --target candidate|reference
        --mode range|torch|build [--iters N] [--warmup W] --out META.json [--trace T.json]

Why a driver: ncu and nsys should see the forwards that matter and nothing else (no import, no
build, no warm-up, no input drawing). In `range` mode the forwards run between
cudaProfilerStart/Stop and inside one NVTX range named `stitch:<target>`, so `ncu
--profile-from-start off` and `nsys --capture-range=cudaProfilerApi` record only them. In `torch`
mode the same forwards run under the PyTorch profiler inside `record_function("stitch:<target>")`
and the Chrome trace goes to --trace. `build` mode only imports the candidate, so its extensions are
in the build cache before a timed or profiled run.

The candidate is loaded, seeded and built exactly as the evaluation worker does it (same cache key,
so a verified candidate is a cache hit). META.json always says what happened: status (ok, no_gpu,
build_error, runtime_error), device, the kernels the candidate compiled, iterations, wall time.
Needs only torch and the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from tools import build, correctness
from tools.worker import (
    DEFAULT_ARCH,
    Outcome,
    exception_summary,
    import_candidate,
    load_problem,
    pin_precision,
)

CLONE_LIMIT_BYTES = 8 << 30  # fresh input copies per forward only while they fit in this much memory


def _write(path: str, meta: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps(meta, indent=1))
    os.replace(tmp, path)


def _construct(cls: Any, init_inputs: list[Any], device: torch.device, seed: int) -> torch.nn.Module:
    correctness.set_seed(seed)
    return cls(*init_inputs).to(device)


def _batches(inputs: list[Any], count: int) -> list[list[Any]]:
    """One private copy of the inputs per forward, made before the range (no copies inside it)."""
    size = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    if size * count > CLONE_LIMIT_BYTES:
        return [inputs] * count
    return [correctness.clone_inputs(inputs) for _ in range(count)]


def run(args: argparse.Namespace, meta: dict[str, Any]) -> None:
    """Everything up to the profiled forwards; raises Outcome for a status other than ok."""
    arch = args.arch or (
        f"sm_{''.join(map(str, torch.cuda.get_device_capability()))}" if torch.cuda.is_available() else DEFAULT_ARCH
    )
    cache_dir = Path(args.cache_dir) if args.cache_dir else build.default_cache_dir()
    build.install_cached_load_inline(arch, cache_dir)
    request: dict[str, Any] = {"problem_source": Path(args.problem).read_text(), "problem_name": "problem"}
    if args.candidate:
        request["candidate_source"] = Path(args.candidate).read_text()
    pin_precision()
    problem = load_problem(request) if args.mode != "build" else None
    candidate = None
    if args.candidate and (args.target == "candidate" or args.mode == "build"):
        candidate = import_candidate(request, meta)  # type: ignore[arg-type]
        meta["own_kernels"] = list(meta.get("build", {}).get("kernels", []))
    if args.mode == "build":
        meta["message"] = f"built {len(meta.get('build', {}).get('extensions', []))} extension(s)"
        return
    if args.target == "candidate" and candidate is None:
        raise Outcome("runtime_error", "bad request: --target candidate needs --candidate")
    if not torch.cuda.is_available():
        raise Outcome("no_gpu", "there is no CUDA device here (torch.cuda.is_available() is False)")
    device = torch.device("cuda")
    meta["device"] = torch.cuda.get_device_name(device)
    assert problem is not None
    correctness.set_seed(args.seed)
    init_inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_init_inputs()]
    cls = candidate.ModelNew if candidate is not None else problem.Model
    who = "ModelNew" if candidate is not None else "Model"
    try:
        model = _construct(cls, init_inputs, device, args.seed)
        pin_precision()
        correctness.set_seed(args.seed)
        inputs = correctness.draw_inputs(problem.get_inputs, device, on_device=True)
        with torch.no_grad():
            for _ in range(args.warmup):
                model(*correctness.clone_inputs(inputs))
            batches = _batches(inputs, args.iters)
            torch.cuda.synchronize(device)
            meta["phase"] = "profiling"
            wall = profile(model, batches, args, device)
    except Outcome:
        raise
    except Exception as exc:
        raise Outcome("runtime_error", f"{who} raised while profiled: {exception_summary(exc)}") from None
    meta["wall_ms_per_forward"] = round(wall * 1e3 / max(args.iters, 1), 6)
    meta["message"] = f"{args.iters} forward(s) of {who} profiled in {args.mode} mode"


def profile(model: torch.nn.Module, batches: list[list[Any]], args: argparse.Namespace, device: torch.device) -> float:
    """The measured part: only the forwards, inside the profiler's range. Returns wall seconds."""
    name = f"stitch:{args.target}"
    if args.mode == "torch":
        from torch.profiler import ProfilerActivity, record_function
        from torch.profiler import profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            started = time.perf_counter()
            with record_function(name):
                for batch in batches:
                    model(*batch)
            torch.cuda.synchronize(device)
            wall = time.perf_counter() - started
        prof.export_chrome_trace(args.trace)
        return wall
    torch.cuda.profiler.start()
    started = time.perf_counter()
    torch.cuda.nvtx.range_push(name)
    for batch in batches:
        model(*batch)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize(device)
    wall = time.perf_counter() - started
    torch.cuda.profiler.stop()
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.profile_target", description=__doc__.split("\n")[0])
    parser.add_argument("--problem", required=True, help="the reference program (KernelBench format)")
    parser.add_argument("--candidate", help="the program defining ModelNew")
    parser.add_argument("--target", choices=("candidate", "reference"), default="candidate")
    parser.add_argument("--mode", choices=("range", "torch", "build"), default="range")
    parser.add_argument("--iters", type=int, default=1, help="forwards inside the profiled range")
    parser.add_argument("--warmup", type=int, default=1, help="forwards before it (not profiled)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--arch", help="build target, e.g. sm_90 (default: the GPU's)")
    parser.add_argument("--cache-dir", help="build cache root (default: tools.build.default_cache_dir())")
    parser.add_argument("--trace", help="torch mode: where the Chrome trace goes")
    parser.add_argument("--out", required=True, help="META.json: what happened")
    args = parser.parse_args(argv)
    if args.mode == "torch" and not args.trace:
        parser.error("--mode torch needs --trace")
    started = time.monotonic()
    meta: dict[str, Any] = {
        "status": "ok",
        "message": "",
        "target": args.target,
        "mode": args.mode,
        "iters": args.iters,
        "warmup": args.warmup,
        "device": "",
        "own_kernels": [],
    }
    build.clear_build_records()
    try:
        run(args, meta)
    except Outcome as stopped:
        meta["status"], meta["message"] = stopped.status, stopped.message
    except Exception as exc:  # the harness itself failed: say so rather than die silently
        meta["status"], meta["message"] = "runtime_error", f"driver error: {exception_summary(exc)}"
    meta["seconds"] = round(time.monotonic() - started, 3)
    _write(args.out, meta)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip the candidate's atexit hooks, as the worker does
