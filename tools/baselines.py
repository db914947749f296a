"""PyTorch eager and torch.compile baselines of a reference, timed like the candidate, cached per machine.

    python -m tools.baselines --request REQ.json --response RESP.json [--progress PROGRESS.json]
    python -m tools.baselines --suite evals/suite [--modes eager,default] [--out DIR] [--only REGEX]   (tools.baseline_suite)

Why: every speedup StitchCUDA reports is against PyTorch measured in the same run, on the same GPU,
with the same method as the candidate (tools.worker.timing.time_forward: cold L2, CUDA events, fresh
input clones per call), so this module times eager and the three torch.compile modes that matter
(default, max-autotune-no-cudagraphs, reduce-overhead) the way the worker times a candidate.
The timing method is the worker's for the request's harness mode (KernelBench's CUDA-event method or
the strict one), under `no_grad` as KernelBench times its own baselines (`measure_ref_program_time`),
so torch.compile builds inference graphs. Compilation is kept out of the numbers and out of the
quiet window: each compile mode first runs COMPILE_WARMUP untimed calls (compiling, autotuning,
recording CUDA graphs) inside the shared timing window (tools.worker.timing_window: CPU work, it
overlaps other problems' GPU work but no timing), with `torch._dynamo.reset()` before each mode so no
mode reuses another's graphs. Then the mode and eager are timed side by side, interleaved in rounds
(tools.worker.rounds) inside the quiet window, so each mode's ratio to eager is a same-moment ratio
(`ratio_vs_eager`, `eager_side_by_side_ms`). Like the worker it runs in its own process
(`measure_baselines` starts it, with a time limit, and kills its process group when the limit runs
out) inside the sandbox (tools.sandbox, as the candidate: the reference is code the user
downloaded), holds the device lock only while timing, and speaks JSON.

Results are cached (tools.baseline_cache: keyed by GPU, torch, problem hash, mode and timing
method). Each mode is written to the cache as soon as it is measured: a run killed by its time
limit keeps what it finished. Standard library and torch only.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from tools.baseline_cache import (  # re-exported: callers know them as tools.baselines.*
    CACHE_FILE,
    cache_key,
    cache_path,
    harness_mode,
    inputs_on_device,
    problem_hash,
    read_cache,
    store,
    timing_method,
    timing_rounds,
)
from tools.baseline_results import best_compile, speedups  # re-exported, as the cache names above
from tools.build import default_cache_dir
from tools.process import read_json, wait_then_kill_group, write_atomic
from tools.protocol import json_safe
from tools.sandbox import Sandbox, SandboxSettings
from tools.worker import gpu_lock, timing_window
from tools.worker.compare import PRECISIONS
from tools.worker.compiled import AUTOTUNING_MODES, COMPILE_MODES, compile_mode
from tools.worker.guards import pin_precision  # the worker's settings: both sides timed alike
from tools.worker.inputs import clone_inputs, draw_inputs, set_seed
from tools.worker.loading import ProblemError, exec_problem_source
from tools.worker.rounds import Contestant, time_in_rounds

MODES: tuple[str, ...] = ("eager", *COMPILE_MODES)
DEFAULT_TIMEOUT_S = 1800.0
# Baseline processes that may hold GPU memory at once per GPU (the rest wait for a slot): twelve at
# once ran an 80 GB H100 out of memory (docs/timing.md). STITCHCUDA_BASELINE_SLOTS overrides; 0: no limit.
SLOTS_ENV = "STITCHCUDA_BASELINE_SLOTS"
DEFAULT_SLOTS = 4
BUDGET_SHARE = 0.8  # of the time left that one mode's timed loop may use


class BaselineError(Exception):
    """A bad request or a reference that cannot run: ends the run with runtime_error or no_gpu."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# ----------------------------------------------------------------------------------------------
# Measuring (in the child process)
# ----------------------------------------------------------------------------------------------


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"cpu:{platform.machine()}:{os.cpu_count()}"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _release(device: torch.device) -> None:
    torch._dynamo.reset()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def time_side_by_side(
    contestants: dict[str, Callable[..., Any]],
    inputs: list[Any],
    device: torch.device,
    request: dict[str, Any],
    budget_s: float,
) -> dict[str, Any]:
    """The contestants (eager first) in interleaved rounds inside the quiet window, under no_grad
    (as KernelBench times its baselines, measure_ref_program_time: inference)."""
    with torch.no_grad(), timing_window.quiet(request.get("cache_dir")) as waited:
        info = time_in_rounds(
            [Contestant(name, fn) for name, fn in contestants.items()],
            [inputs],
            device,
            method=harness_mode(request),
            warmup=int(request.get("warmup", 3)),
            trials=int(request.get("perf_trials", 100)),
            rounds=timing_rounds(request),
            budget_s=budget_s,
        )
    info["window_wait_s"] = round(waited, 3)
    return info


def _load(request: dict[str, Any]) -> Any:
    source = request.get("problem_source")
    if not source:
        raise BaselineError("runtime_error", "bad request: no problem_source")
    try:
        return exec_problem_source(source, request.get("problem_name", "problem"), "problem.py")
    except ProblemError as exc:
        raise BaselineError("runtime_error", f"problem: {exc}") from None


def construct_model(problem: Any, device: torch.device, dtype: torch.dtype, seed: int) -> torch.nn.Module:
    """KernelBench's seeding (the same as the worker's construct for the reference)."""
    set_seed(seed)
    init = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_init_inputs()]
    set_seed(seed)
    return problem.Model(*init).to(device=device, dtype=dtype)


def draw_problem_inputs(
    problem: Any, device: torch.device, dtype: torch.dtype, request: dict[str, Any]
) -> list[Any]:
    set_seed(int(request.get("seed", 42)))
    on_device = inputs_on_device(request)
    if dtype == torch.float32:
        return draw_inputs(problem.get_inputs, device, on_device)
    return draw_inputs(problem.get_inputs, device, on_device, dtype)  # type: ignore[call-arg]


def _validate(request: dict[str, Any]) -> tuple[list[str], torch.device, torch.dtype]:
    if harness_mode(request) not in ("kernelbench", "strict"):
        raise BaselineError("runtime_error", f"bad request: unknown mode {request.get('mode')!r}")
    modes = list(request.get("modes") or MODES)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise BaselineError(
            "runtime_error", f"bad request: unknown mode(s) {unknown} (choose from {list(MODES)})"
        )
    kind = request.get("device", "cuda")
    if kind not in ("cuda", "cpu"):
        raise BaselineError("runtime_error", f"bad request: unknown device {kind!r} (cuda or cpu)")
    precision = request.get("precision", "fp32")
    if precision not in PRECISIONS:
        raise BaselineError("runtime_error", f"bad request: unknown precision {precision!r}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise BaselineError("no_gpu", "no CUDA device here (torch.cuda.is_available() is False)")
    return modes, torch.device(kind), PRECISIONS[precision]


def run_request(
    request: dict[str, Any], progress: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Answer one baseline request; never raises. `progress` gets the partial answer after each mode."""
    started = time.monotonic()
    response: dict[str, Any] = {"status": "passed", "message": "", "baselines": {}}
    try:
        _run(request, response, progress or (lambda _: None), started)
    except BaselineError as stop:
        response.update(status=stop.status, message=stop.message)
    except Exception as exc:  # the reference itself failed: say where
        frames = traceback.extract_tb(exc.__traceback__)[-2:]
        where = "; ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames)
        response.update(status="runtime_error", message=f"{type(exc).__name__}: {exc} ({where})")
    response["best_compile"] = best_compile(response.get("baselines", {}))
    response["seconds"] = round(time.monotonic() - started, 3)
    return json_safe(response)


def _run(
    request: dict[str, Any],
    response: dict[str, Any],
    progress: Callable[[dict[str, Any]], None],
    started: float,
) -> None:
    modes, device, dtype = _validate(request)
    if "deadline" in request:
        deadline = time.monotonic() + float(request["deadline"]) - time.time()
    else:
        deadline = started + float(request.get("timeout_s", DEFAULT_TIMEOUT_S))
    source = request.get("problem_source") or ""
    name = device_name(device)
    method = timing_method(request)
    digest = problem_hash(source)
    response.update(device=name, torch=torch.__version__, problem_hash=digest, timing_method=method)
    path = cache_path(request.get("cache_dir"))
    cached = {} if request.get("refresh") else read_cache(path)
    keys = {mode: cache_key(name, torch.__version__, digest, mode, method) for mode in modes}
    todo = []
    for mode in modes:
        hit = cached.get(keys[mode])
        if hit is not None and not _compiled_beside_others(mode, hit):
            response["baselines"][mode] = {**hit, "cached": True}
        else:
            todo.append(mode)
    if not todo:
        response["message"] = f"all {len(modes)} baseline(s) from the cache"
        return
    problem = _load(request)
    pin_precision()
    # The build cache's lock, as the workers': not the baseline cache's folder, which
    # $STITCHCUDA_BASELINE_CACHE may put elsewhere, and then a worker's correctness trials ran
    # on the GPU beside this process's timing.
    lock = gpu_lock.lock_path(request.get("cache_dir"), device)
    slots = int(request.get("slots") or 0)
    holding = (
        gpu_lock.slot(lock, slots) if device.type == "cuda" and slots > 0 else contextlib.nullcontext(0.0)
    )
    with holding as waited:  # the model, inputs and compiled graphs stay in GPU memory until the end
        response["slot_wait_s"] = round(waited, 3)
        failed = _measure_modes(
            request, response, progress, problem, device, dtype, todo, keys, lock, deadline
        )
    done = len(todo) - len(failed)
    response["message"] = (
        f"measured {done} of {len(todo)} mode(s); {len(modes) - len(todo)} from the cache"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )


def _compiled_beside_others(mode: str, entry: dict[str, Any]) -> bool:
    """Whether a cached autotuning mode was compiled without the device's lock (entries from before
    baselines held it: their kernel choices were timed beside other processes' GPU work); such an
    entry is measured again."""
    return mode in AUTOTUNING_MODES and not entry.get("compiled_alone")


def _measure_modes(
    request: dict[str, Any],
    response: dict[str, Any],
    progress: Callable[[dict[str, Any]], None],
    problem: Any,
    device: torch.device,
    dtype: torch.dtype,
    todo: list[str],
    keys: dict[str, str],
    lock: Path,
    deadline: float,
) -> list[str]:
    """Time each mode still to measure beside eager, each stored in the cache as soon as it is done;
    the modes that failed. A mode that ran out of GPU memory is tried once more holding the device
    lock throughout (compilation included), so no worker's tensors compete with it."""
    seed = int(request.get("seed", 42))
    path = cache_path(request.get("cache_dir"))
    # Putting the model and inputs on the GPU maps memory, which slows a memory-bound kernel another
    # process is timing: it waits, as builds do, while a timing holds the machine's quiet window.
    with timing_window.busy(request.get("cache_dir")) if device.type == "cuda" else contextlib.nullcontext():
        model = construct_model(problem, device, dtype, seed)
        inputs = draw_problem_inputs(problem, device, dtype, request)
    reference_output = None
    if any(m != "eager" for m in todo):
        with torch.no_grad(), gpu_lock.exclusive(lock):
            reference_output = model(*clone_inputs(inputs))
            _sync(device)
    failed: list[str] = []
    for index, mode in enumerate(todo):
        budget = max(1.0, (deadline - time.monotonic()) * BUDGET_SHARE / (len(todo) - index))
        entry, info = _measure_mode(
            mode,
            device,
            functools.partial(
                _timed_mode, mode, model, inputs, device, reference_output, request, lock, budget
            ),
        )
        if info is None:
            failed.append(mode)
            response["baselines"][mode] = entry
            progress(response)
            continue
        entry.update(info[mode])
        entry.update(order=info["order"], window_wait_s=info["window_wait_s"])
        if mode != "eager":  # the eager time of the same rounds: this mode's ratio is side by side
            entry["eager_side_by_side_ms"] = info["eager"]["mean_ms"]
            entry["ratio_vs_eager"] = info["ratios"][mode]
        entry.update(problem=request.get("problem_name", ""), measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        store(path, keys[mode], json_safe(entry))
        response["baselines"][mode] = {**entry, "cached": False}
        progress(response)
    return failed


def _measure_mode(
    mode: str,
    device: torch.device,
    attempt: Callable[[bool], tuple[dict[str, Any], dict[str, Any]]],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """`attempt(alone)`'s (entry, side-by-side timing), or (the entry with its error, None). Out of
    GPU memory, the mode is tried once more alone on the device (`retried_after_oom`)."""
    error = ""
    for alone in (False, True):
        retried = {"retried_after_oom": True} if alone else {}
        try:
            entry, info = attempt(alone)
        except Exception as exc:  # one mode failing (a compiler error) leaves the others standing
            error, oom = f"{type(exc).__name__}: {_first_line(exc)}", out_of_memory(exc)
        else:
            return entry | retried, info
        _release(device)  # outside the handler: the failed attempt's frames (and tensors) are gone
        if not oom:
            break
    return {"mode": mode, "error": error, **retried}, None


def _timed_mode(
    mode: str,
    model: torch.nn.Module,
    inputs: list[Any],
    device: torch.device,
    reference_output: Any,
    request: dict[str, Any],
    lock: Path,
    budget: float,
    alone: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the mode's entry so far, the side-by-side timing with eager); alone: compile under the lock too
    (an autotuning mode always does: its compilation times kernels on the GPU)."""
    contestants: dict[str, Callable[..., Any]] = {"eager": model}
    entry: dict[str, Any] = {"mode": mode}
    alone = alone or mode in AUTOTUNING_MODES
    with gpu_lock.exclusive(lock) if alone else contextlib.nullcontext():
        if mode != "eager":  # compiling is CPU work: in the shared window
            contestants[mode], entry = compile_mode(
                mode, model, inputs, device, reference_output, request.get("cache_dir")
            )
            entry["compiled_alone"] = alone
            budget = max(1.0, budget - entry["compile_s"])
        with contextlib.nullcontext() if alone else gpu_lock.exclusive(lock):
            info = time_side_by_side(contestants, inputs, device, request, budget)
            del contestants
            _release(device)  # before the lock goes: unmapping memory would slow the next timing
    return entry, info


def out_of_memory(exc: BaseException) -> bool:
    """Whether a failure was the GPU running out of memory (torch's error, or a compiler's wrapping it)."""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = f"{type(exc).__name__}: {exc}".lower()
    return "out of memory" in text or "cudaerrormemoryallocation" in text


def _first_line(exc: BaseException) -> str:
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return text[:300]


# ----------------------------------------------------------------------------------------------
# The parent side: one isolated, time-limited process
# ----------------------------------------------------------------------------------------------


def measure_baselines(
    problem_source: str,
    problem_name: str = "problem",
    *,
    modes: Sequence[str] = MODES,
    device: str = "cuda",
    perf_trials: int = 100,
    warmup: int = 3,
    seed: int = 42,
    precision: str = "fp32",
    on_device: bool = False,
    harness: str = "kernelbench",
    cache_dir: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    python: str = sys.executable,
    sandbox: str | None = None,
    slots: int | None = None,
) -> dict[str, Any]:
    """Baselines of one problem, measured in a fresh sandboxed process under a time limit.

    On a timeout or a crash the answer has status "timeout"/"crashed" and keeps the modes the
    child finished (they are in the cache as well). Never raises for the reference's sake;
    sandbox (auto, required, off; default $STITCHCUDA_SANDBOX) raises SandboxError for `required`
    on a platform that lacks a layer. slots: baseline processes holding GPU memory at once
    (default $STITCHCUDA_BASELINE_SLOTS, else DEFAULT_SLOTS).
    """
    request = {
        "problem_name": problem_name,
        "problem_source": problem_source,
        "modes": list(modes),
        "device": device,
        "perf_trials": perf_trials,
        "warmup": warmup,
        "seed": seed,
        "precision": precision,
        "inputs_on_device": on_device,
        "mode": harness,
        "cache_dir": str(cache_dir or default_cache_dir()),
        "refresh": refresh,
        "timeout_s": timeout_s,
        "deadline": time.time() + timeout_s,
        "slots": baseline_slots() if slots is None else slots,
    }
    settings = SandboxSettings.resolve(sandbox, device=device, timeout_s=timeout_s)
    with tempfile.TemporaryDirectory(prefix="stitch-baselines-") as tmp:
        writable = [str(cache_path(str(request["cache_dir"])).parent), *timing_window.sandbox_paths()]
        with Sandbox(tmp, settings, caches=[str(request["cache_dir"])], writable=writable) as box:
            answer = _measure_in(Path(tmp), request, timeout_s, python, box)
        return box.annotate(answer)


def baseline_slots() -> int:
    """$STITCHCUDA_BASELINE_SLOTS, else DEFAULT_SLOTS; a value that is not a count is an error."""
    raw = os.environ.get(SLOTS_ENV, "").strip()
    if not raw:
        return DEFAULT_SLOTS
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{SLOTS_ENV} must be a whole number of slots, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"{SLOTS_ENV} must be >= 0 (0: no limit), got {value}")
    return value


def _measure_in(
    tmp: Path, request: dict[str, Any], limit: float, python: str, box: Sandbox
) -> dict[str, Any]:
    req, resp, prog, log = (tmp / n for n in ("request.json", "response.json", "progress.json", "log.txt"))
    req.write_text(json.dumps(request))
    cmd = [
        python,
        "-m",
        "tools.baselines",
        "--request",
        str(req),
        "--response",
        str(resp),
        "--progress",
        str(prog),
    ]
    started = time.monotonic()
    with open(log, "wb") as out:
        try:
            proc = box.popen(cmd, cwd=tmp, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        except OSError as exc:
            return {"status": "crashed", "message": f"cannot start {python}: {exc}", "baselines": {}}
        timed_out = wait_then_kill_group(proc, limit)
    answer = None if timed_out else read_json(resp)
    if answer is None:
        partial = read_json(prog) or {"baselines": {}}
        tail = log.read_bytes()[-1500:].decode(errors="replace").strip().splitlines()[-6:]
        if timed_out:
            status, why = "timeout", f"timed out after {limit:g} s"
        else:
            status, why = "crashed", f"the baseline process exited with {proc.returncode} without an answer"
        answer = {**partial, "status": status, "message": "\n".join([why, *tail])}
        answer["best_compile"] = best_compile(answer.get("baselines") or {})
    answer["wall_s"] = round(time.monotonic() - started, 3)
    return answer


# ----------------------------------------------------------------------------------------------
# Command line: the protocol (and, through tools.baseline_suite, a whole suite for the lead)
# ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.baselines", description=__doc__.split("\n")[0])
    parser.add_argument("--request", help="request JSON file (protocol mode)")
    parser.add_argument("--response", help="response JSON file (default: stdout)")
    parser.add_argument("--progress", help="file kept holding the partial response")
    parser.add_argument("--suite", nargs="+", help="suite folders or problem files: measure them all")
    parser.add_argument("--modes", default=",".join(MODES), help="comma list (suite mode)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--perf-trials", type=int, default=100)
    parser.add_argument(
        "--harness", default="kernelbench", choices=["kernelbench", "strict"], help="timing method"
    )
    parser.add_argument(
        "--inputs-on-device", action="store_true", help="strict harness: draw inputs on the GPU"
    )
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per problem")
    parser.add_argument("--only", help="regular expression on level/name (suite mode)")
    parser.add_argument("--out", help="folder for baselines.jsonl and baselines.md (suite mode)")
    parser.add_argument("--cache-dir", help="build cache root (default: $STITCHCUDA_CACHE)")
    parser.add_argument("--refresh", action="store_true", help="measure again even when cached")
    args = parser.parse_args(argv)
    if args.suite:
        from tools.baseline_suite import suite_main

        return suite_main(args, measure_baselines)
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # whatever the reference or the compiler prints goes to stderr
    try:
        request = json.loads(Path(args.request).read_text() if args.request else sys.stdin.read())
        if not isinstance(request, dict):
            raise ValueError("expected a JSON object")
    except (OSError, ValueError) as exc:
        response: dict[str, Any] = {
            "status": "runtime_error",
            "message": f"bad request: {exc}",
            "baselines": {},
        }
    else:
        progress = (
            (lambda partial: write_atomic(args.progress, json.dumps(partial, allow_nan=False)))
            if args.progress
            else None
        )
        response = run_request(request, progress)
    if args.response:
        write_atomic(args.response, json.dumps(response, allow_nan=False))
    else:
        os.write(answer_fd, json.dumps(response).encode() + b"\n")
    return 0


if __name__ == "__main__":
    timing_window.exit_process(main())  # its device memory goes back outside any timing


__all__ = [
    "CACHE_FILE",
    "MODES",
    "best_compile",
    "cache_key",
    "cache_path",
    "measure_baselines",
    "problem_hash",
    "read_cache",
    "run_request",
    "speedups",
    "store",
    "timing_method",
]
