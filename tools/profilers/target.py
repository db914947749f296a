"""The program a profiler runs: build the candidate (or take the reference), run N forwards in a range.

    python -m tools.profilers.target --problem P.py [--candidate C.py] --target candidate|reference|both
        --mode range|torch|build [--iters N] [--warmup W] --out META.json [--trace T.json]

Why a driver: ncu and nsys should see the forwards that matter and nothing else (no import, no
build, no warm-up, no input drawing). In `range` mode the forwards run between
cudaProfilerStart/Stop and inside one NVTX range named `stitch:<target>`, so `ncu
--profile-from-start off` and `nsys --capture-range=cudaProfilerApi` record only them (`both` runs
the reference's range, then the candidate's, in one recording: one process start instead of two,
split again by range name). In `torch`
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
import sys
import time
from pathlib import Path
from typing import Any

import torch

from tools import build
from tools.process import write_atomic
from tools.protocol import EvalRequest
from tools.worker import gpu_lock
from tools.worker.entry import DEFAULT_ARCH
from tools.worker.guards import pin_precision
from tools.worker.inputs import clone_inputs, draw_inputs, set_seed
from tools.worker.loading import import_candidate, load_problem
from tools.worker.reporting import Outcome, exception_summary

CLONE_LIMIT_BYTES = 8 << 30  # fresh input copies per forward only while they fit in this much memory


def _construct(cls: Any, init_inputs: list[Any], device: torch.device, seed: int) -> torch.nn.Module:
    set_seed(seed)
    return cls(*init_inputs).to(device)


def _batches(inputs: list[Any], count: int) -> list[list[Any]]:
    """One private copy of the inputs per forward, made before the range (no copies inside it)."""
    size = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    if size * count > CLONE_LIMIT_BYTES:
        return [inputs] * count
    return [clone_inputs(inputs) for _ in range(count)]


def targets_of(target: str) -> list[str]:
    return ["reference", "candidate"] if target == "both" else [target]


def run(args: argparse.Namespace, meta: dict[str, Any]) -> None:
    """Everything up to the profiled forwards; raises Outcome for a status other than ok."""
    arch = args.arch or (
        f"sm_{''.join(map(str, torch.cuda.get_device_capability()))}"
        if torch.cuda.is_available()
        else DEFAULT_ARCH
    )
    cache_dir = Path(args.cache_dir) if args.cache_dir else build.default_cache_dir()
    build.install_cached_load_inline(arch, cache_dir)
    request = EvalRequest(problem_source=Path(args.problem).read_text(), problem_name="problem")
    if args.candidate:
        request["candidate_source"] = Path(args.candidate).read_text()
    pin_precision()
    targets = targets_of(args.target)
    problem = load_problem(request) if args.mode != "build" else None
    candidate = None
    if args.candidate and ("candidate" in targets or args.mode == "build"):
        candidate = import_candidate(request, meta)  # type: ignore[arg-type]
        meta["own_kernels"] = list(meta.get("build", {}).get("kernels", []))
    if args.mode == "build":
        meta["message"] = f"built {len(meta.get('build', {}).get('extensions', []))} extension(s)"
        return
    if "candidate" in targets and candidate is None:
        raise Outcome("runtime_error", "bad request: --target candidate or both needs --candidate")
    if not torch.cuda.is_available():
        raise Outcome("no_gpu", "there is no CUDA device here (torch.cuda.is_available() is False)")
    device = torch.device("cuda")
    meta["device"] = torch.cuda.get_device_name(device)
    assert problem is not None
    meta["phase"] = "waiting for the device lock"
    with gpu_lock.exclusive(gpu_lock.lock_path(cache_dir, device)):  # the worker's lock: no overlapping runs
        measure(args, meta, problem, candidate, targets, device)


def measure(
    args: argparse.Namespace,
    meta: dict[str, Any],
    problem: Any,
    candidate: Any,
    targets: list[str],
    device: torch.device,
) -> None:
    """Construct, warm up and profile every target (under the device lock)."""
    set_seed(args.seed)
    init_inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_init_inputs()]
    runs = []
    for target in targets:
        who = "ModelNew" if target == "candidate" else "Model"
        cls = candidate.ModelNew if target == "candidate" else problem.Model  # type: ignore[union-attr]
        try:
            model = _construct(cls, init_inputs, device, args.seed)
            pin_precision()
            set_seed(args.seed)
            inputs = draw_inputs(problem.get_inputs, device, on_device=True)
            with torch.no_grad():
                for _ in range(args.warmup):
                    model(*clone_inputs(inputs))
            runs.append((target, who, model, _batches(inputs, args.iters)))
        except Exception as exc:
            raise Outcome(
                "runtime_error", f"{who} raised while warmed up: {exception_summary(exc)}"
            ) from None
    torch.cuda.synchronize(device)
    meta["phase"] = "profiling"
    walls = profile(runs, args, device)
    meta["wall_ms_per_forward"] = {t: round(w * 1e3 / max(args.iters, 1), 6) for t, w in walls.items()}
    meta["message"] = f"{args.iters} forward(s) of {', '.join(targets)} profiled in {args.mode} mode"


def profile(
    runs: list[tuple[str, str, Any, list[list[Any]]]], args: argparse.Namespace, device: torch.device
) -> dict[str, float]:
    """The measured part: each target's forwards inside its own range. Wall seconds per target.

    The range closes before the synchronize that waits for the forwards, so the harness's own sync
    is not counted as one of the program's.
    """
    walls: dict[str, float] = {}
    for_torch = args.mode == "torch"
    if for_torch:
        from torch.profiler import ProfilerActivity, record_function
        from torch.profiler import profile as torch_profile

        session: Any = torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    else:
        session = None
    if session is not None:
        session.__enter__()
    else:
        torch.cuda.profiler.start()
    try:
        for target, who, model, batches in runs:
            started = time.perf_counter()
            try:
                with torch.no_grad():
                    if for_torch:
                        with record_function(f"stitch:{target}"):
                            for batch in batches:
                                model(*batch)
                    else:
                        torch.cuda.nvtx.range_push(f"stitch:{target}")
                        try:
                            for batch in batches:
                                model(*batch)
                        finally:
                            torch.cuda.nvtx.range_pop()
                torch.cuda.synchronize(device)
            except Exception as exc:
                raise Outcome(
                    "runtime_error", f"{who} raised while profiled: {exception_summary(exc)}"
                ) from None
            walls[target] = time.perf_counter() - started
    finally:
        if session is not None:
            session.__exit__(None, None, None)
        else:
            torch.cuda.profiler.stop()
    if session is not None:
        session.export_chrome_trace(args.trace)
    return walls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.profilers.target", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--problem", required=True, help="the reference program (KernelBench format)")
    parser.add_argument("--candidate", help="the program defining ModelNew")
    parser.add_argument("--target", choices=("candidate", "reference", "both"), default="candidate")
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
    write_atomic(args.out, json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    # A normal exit (not the worker's os._exit): the profilers' injected libraries flush at process exit.
    sys.exit(main())
