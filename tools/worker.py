"""The isolated evaluation worker: build, check, time or profile one candidate, answer in JSON.

    python -m tools.worker --request REQ.json --response RESP.json [--progress PROGRESS.json]

Why a separate process: a candidate is code a model wrote; it may crash, hang, corrupt its CUDA
context or patch the harness. `tools.evaluate` runs this module in its own process group with a
time limit, and everything here imports only torch and the standard library so it runs on any CUDA
box. The candidate's prints are moved to stderr, so stdout stays free for the answer when no
--response file is given. --progress names a file that always holds the current phase and the
partial answer, which is what the parent reports when it has to kill us.

Rules (KernelBench's, see tools.correctness): seeded construction of Model and ModelNew, TF32 off,
5 correctness trials in training mode under no_grad, then cold-L2 CUDA-event timing of both. Only
the measuring part holds the device lock; builds run in parallel across workers.
"""

from __future__ import annotations

import argparse
import json
import linecache
import math
import os
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tools import build, correctness, gpu_lock, profiling, timing
from tools.problem import ProblemError, exec_problem_source
from tools.protocol import BuildInfo, EvalRequest, EvalResponse

DEFAULT_ARCH = "sm_90"  # the project's target (H100/H200) when neither the request nor a GPU says
CANDIDATE_FILE = "candidate.py"
PROBLEM_FILE = "problem.py"
BUDGET_SHARE = 0.8  # of the time left that timing may use; the rest is headroom for the answer


class Outcome(Exception):
    """Ends a run early with a final status and message."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Progress:
    """Keeps <path> holding {"phase", "response"}: what the parent reports if it must kill us."""

    def __init__(self, path: str | None, response: EvalResponse) -> None:
        self.path = path
        self.response = response

    def __call__(self, phase: str) -> None:
        self.response["phase"] = phase
        if not self.path:
            return
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as handle:
            json.dump({"phase": phase, "response": _finite(dict(self.response))}, handle)
        os.replace(tmp, self.path)


_LIBRARY_DIRS = (str(Path(torch.__file__).resolve().parent), str(Path(__file__).resolve().parent))


def exception_summary(exc: BaseException, frames: int = 3) -> str:
    """'Type: first line of the message' plus the program's last frames as 'file:line in func: code'.

    Frames inside torch and the harness are left out when the program's own frames remain: the
    coder can act on `candidate.py:32 in forward`, not on torch's module dispatch.
    """
    text = str(exc).strip().splitlines()
    lines = [f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__]
    stack = traceback.extract_tb(exc.__traceback__)
    own = [f for f in stack if not os.path.abspath(f.filename).startswith(_LIBRARY_DIRS)]
    for frame in (own or stack)[-frames:]:
        code = (frame.line or "").strip()
        lines.append(f"  {Path(frame.filename).name}:{frame.lineno} in {frame.name}: {code}")
    return "\n".join(lines)


def _finite(value: Any) -> Any:
    """Strict JSON: non-finite floats become None (the message says what happened)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


# ----------------------------------------------------------------------------------------------
# Guards: what a candidate must not change
# ----------------------------------------------------------------------------------------------

_GUARDED: dict[str, Callable[[], Any]] = {
    "torch.cuda.synchronize": lambda: torch.cuda.synchronize,
    "torch.cuda.Event": lambda: torch.cuda.Event,
    "torch.cuda.Event.record": lambda: torch.cuda.Event.record,
    "torch.cuda.Event.elapsed_time": lambda: torch.cuda.Event.elapsed_time,
    "torch.cuda.current_stream": lambda: torch.cuda.current_stream,
    "time.perf_counter": lambda: time.perf_counter,
    "torch.allclose": lambda: torch.allclose,
    "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
}


def pin_precision() -> None:
    """fp32 means fp32: no TF32 in matmuls or convolutions, for the reference and the candidate."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def snapshot_guards() -> dict[str, Any]:
    return {name: get() for name, get in _GUARDED.items()}


def check_guards(snapshot: dict[str, Any]) -> None:
    changed = [name for name, get in _GUARDED.items() if get() is not snapshot[name]]
    if changed:
        raise Outcome(
            "runtime_error",
            f"the candidate changed {', '.join(changed)}; the harness's clocks, checks and precision "
            "settings must not be patched",
        )


# ----------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------


def _register_source(filename: str, source: str) -> None:
    """Let tracebacks show the lines of code that only exist as strings."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def load_problem(request: EvalRequest) -> types.ModuleType:
    source = request.get("problem_source")
    if not source:
        raise Outcome("runtime_error", "bad request: no problem_source")
    _register_source(PROBLEM_FILE, source)
    try:
        return exec_problem_source(source, request.get("problem_name", "problem"), PROBLEM_FILE)
    except ProblemError as exc:
        raise Outcome("runtime_error", f"problem: {exc}") from None


def build_info(records: list[build.BuildRecord]) -> BuildInfo:
    failed = next((r for r in records if not r.ok), None)
    kernels: list[str] = []
    for record in records:
        kernels += [k for k in record.kernels if k not in kernels]
    return BuildInfo(
        ok=failed is None,
        seconds=round(sum(r.seconds for r in records), 3),
        cached=bool(records) and all(r.cached for r in records),
        errors=list(failed.errors) if failed else [],
        log_tail=failed.log_tail if failed else "",
        extensions=[r.module_name for r in records],
        kernels=kernels,
    )


def raise_for_failed_build() -> None:
    """A failed build decides the status, even if the program caught the error and carried on."""
    failed = next((r for r in build.build_records() if not r.ok), None)
    if failed is not None:
        first = failed.errors[0] if failed.errors else "see the build log"
        raise Outcome("build_error", f"building extension '{failed.name}' failed: {first}")


def import_candidate(request: EvalRequest, response: EvalResponse) -> types.ModuleType:
    """Execute the candidate (which builds its extensions); any failed build is a build_error.

    A failed build counts even when the candidate caught the BuildError and fell back to PyTorch.
    """
    source = request.get("candidate_source")
    if not source:
        raise Outcome("runtime_error", "bad request: no candidate_source")
    _register_source(CANDIDATE_FILE, source)
    module = types.ModuleType("stitch_candidate")
    module.__file__ = CANDIDATE_FILE
    sys.modules[module.__name__] = module
    error: BaseException | None = None
    try:
        exec(compile(source, CANDIDATE_FILE, "exec"), module.__dict__)
    except SyntaxError as exc:
        raise Outcome(
            "runtime_error", f"{CANDIDATE_FILE}: syntax error at line {exc.lineno}: {exc.msg}"
        ) from None
    except (Exception, SystemExit) as exc:  # SystemExit: a candidate calling sys.exit() at import
        error = exc
    response["build"] = build_info(build.build_records())
    raise_for_failed_build()
    if error is not None:
        raise Outcome("runtime_error", f"importing the candidate raised {exception_summary(error)}")
    return module


def construct(
    problem: types.ModuleType, candidate: types.ModuleType, device: torch.device, seed: int
) -> tuple:
    """KernelBench's seeding: the same seed before get_init_inputs, Model and ModelNew."""
    if not callable(getattr(candidate, "ModelNew", None)):
        raise Outcome("runtime_error", "the candidate defines no ModelNew class")
    correctness.set_seed(seed)
    init_inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_init_inputs()]
    steps = (("Model", problem.Model), ("ModelNew", candidate.ModelNew))
    models = []
    for who, cls in steps:
        correctness.set_seed(seed)
        try:
            models.append(cls(*init_inputs).to(device))
        except Exception as exc:
            raise Outcome("runtime_error", f"constructing {who} raised {exception_summary(exc)}") from None
    return models[0], models[1]


# ----------------------------------------------------------------------------------------------
# Actions
# ----------------------------------------------------------------------------------------------


def _run_or_fail(who: str, what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Outcome:
        raise
    except Exception as exc:
        raise Outcome(
            "runtime_error", f"{who}.forward raised while {what}: {exception_summary(exc)}"
        ) from None


def verify(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple,
    device: torch.device,
    deadline: float,
) -> None:
    reference, candidate = models
    seed = int(request.get("seed", 42))
    progress("checking correctness")
    try:
        report = correctness.check_correctness(
            reference,
            candidate,
            problem.get_inputs,
            device,
            trials=int(request.get("correctness_trials", 5)),
            seed=seed,
            atol=float(request.get("atol", correctness.DEFAULT_TOLERANCE)),
            rtol=float(request.get("rtol", correctness.DEFAULT_TOLERANCE)),
            strict=request.get("mode") == "strict",
            inputs_on_device=bool(request.get("inputs_on_device", False)),
        )
    except correctness.ForwardError as exc:
        raise Outcome(
            "runtime_error",
            f"{exc.who}.forward raised on correctness trial {exc.trial}: {exception_summary(exc.error)}",
        ) from None
    response["correctness"] = report.to_dict()  # type: ignore[typeddict-item]
    if not report.ok:
        raise Outcome("wrong_output", report.message)

    correctness.set_seed(seed)
    inputs = correctness.draw_inputs(problem.get_inputs, device, bool(request.get("inputs_on_device", False)))
    warmup = int(request.get("warmup", 3))
    trials = int(request.get("perf_trials", 100))
    timed = [("ModelNew", candidate, "candidate")]
    if request.get("time_reference", True):
        timed.append(("Model", reference, "eager"))
    info: dict[str, Any] = {}
    for index, (who, model, key) in enumerate(timed):
        progress(f"timing {who}")
        budget = max(1.0, (deadline - time.monotonic()) * BUDGET_SHARE / (len(timed) - index))
        stats = _run_or_fail(
            who,
            "being timed",
            lambda m=model, b=budget: timing.time_forward(m, inputs, device, warmup, trials, b),
        )
        info[key] = stats
        info[f"{key}_ms"] = stats["mean_ms"]
        response["timing"] = info  # type: ignore[typeddict-item]
    message = f"correct on {report.trials} trials; {info['candidate_ms']:.4g} ms"
    if "eager_ms" in info:
        speedup = info["eager_ms"] / info["candidate_ms"] if info["candidate_ms"] > 0 else math.inf
        message += f" vs eager {info['eager_ms']:.4g} ms ({speedup:.2f}x)"
    cut = [k for k in ("candidate", "eager") if k in info and info[k]["trials"] < trials]
    if cut:
        message += f"; fewer timed calls than asked ({', '.join(cut)}) to fit the time limit"
    response["message"] = message


def profile(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple,
    device: torch.device,
) -> None:
    reference, candidate = models
    correctness.set_seed(int(request.get("seed", 42)))
    inputs = correctness.draw_inputs(problem.get_inputs, device, bool(request.get("inputs_on_device", False)))
    own = set(response.get("build", {}).get("kernels", []))
    progress("profiling ModelNew")
    info = _run_or_fail(
        "ModelNew", "profiled", lambda: profiling.profile_forward(candidate, inputs, device, own)
    )
    if request.get("profile_reference", False):
        progress("profiling Model")
        info["reference"] = _run_or_fail(
            "Model",
            "profiled",
            lambda: profiling.profile_forward(reference, inputs, device, (), own_is_outside_ops=False),
        )
    response["profile"] = info  # type: ignore[typeddict-item]
    response["message"] = (
        f"{info['device_ms']:.4g} ms {'on device' if device.type == 'cuda' else 'on CPU'} per forward, "
        f"{info['kernel_count']} {'launches' if device.type == 'cuda' else 'top-level ops'}, "
        f"{info['own_kernel_share']:.0%} in the program's own code"
    )


def _default_arch() -> str:
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    return DEFAULT_ARCH


def _run(request: EvalRequest, response: EvalResponse, progress: Progress, started: float) -> None:
    action = request.get("action", "verify")
    if action not in ("verify", "profile", "build"):
        raise Outcome("runtime_error", f"bad request: unknown action {action!r} (verify, profile or build)")
    device_kind = request.get("device", "cuda")
    if device_kind not in ("cuda", "cpu"):
        raise Outcome("runtime_error", f"bad request: unknown device {device_kind!r} (cuda or cpu)")
    if "deadline" in request:  # the parent's kill time, in this process's monotonic clock
        deadline = time.monotonic() + float(request["deadline"]) - time.time()
    else:
        deadline = started + float(request.get("timeout_s", 600.0))
    cache_dir = Path(request.get("cache_dir") or build.default_cache_dir())
    arch = request.get("arch") or _default_arch()
    try:
        build.parse_arch(arch)
    except ValueError as exc:  # a bad arch is a bad request, not a build error
        raise Outcome("runtime_error", f"bad request: {exc}") from None
    build.install_cached_load_inline(
        arch, cache_dir, on_start=lambda name: progress(f"building extension '{name}'")
    )

    problem = None
    if action != "build":
        progress("loading the problem")
        problem = load_problem(request)
    pin_precision()
    guards = snapshot_guards()
    progress("importing the candidate")
    candidate = import_candidate(request, response)
    built = response.get("build", {})
    if action == "build":
        response["message"] = (
            f"built {len(built.get('extensions', []))} extension(s) in {built.get('seconds', 0.0):.1f} s"
            + (" (cache hit)" if built.get("cached") else "")
        )
        return
    if device_kind == "cuda" and not torch.cuda.is_available():
        raise Outcome(
            "no_gpu", "built, but there is no CUDA device here to run it (torch.cuda.is_available() is False)"
        )
    device = torch.device(device_kind)
    response["device"] = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    assert problem is not None
    progress("waiting for the device lock")
    with gpu_lock.exclusive(gpu_lock.lock_path(cache_dir, device.type)):
        progress("constructing the models")
        models = construct(problem, candidate, device, int(request.get("seed", 42)))
        check_guards(guards)
        pin_precision()
        if action == "verify":
            verify(request, response, progress, problem, models, device, deadline)
        else:
            profile(request, response, progress, problem, models, device)
        check_guards(guards)


def run_request(request: EvalRequest, progress_path: str | None = None) -> EvalResponse:
    """Answer one request; never raises (harness failures become runtime_error with 'worker error')."""
    started = time.monotonic()
    response: EvalResponse = {"status": "passed", "message": "", "device": ""}
    progress = Progress(progress_path, response)
    progress("starting")
    build.clear_build_records()
    outcome = Outcome("passed", "")
    try:
        _run(request, response, progress, started)
    except Outcome as stopped:
        outcome = stopped
    except Exception as exc:
        outcome = Outcome("runtime_error", f"worker error: {exception_summary(exc)}")
    if build.build_records():  # builds may also happen lazily, in ModelNew() or forward
        response["build"] = build_info(build.build_records())
        try:
            raise_for_failed_build()
        except Outcome as failed_build:
            outcome = failed_build
    if outcome.status != "passed":
        response["status"] = outcome.status  # type: ignore[typeddict-item]
        response["message"] = outcome.message
    response["phase"] = "done" if response["status"] == "passed" else response.get("phase", "")
    response["seconds"] = round(time.monotonic() - started, 3)
    return _finite(response)


def _read_request(path: str | None) -> tuple[EvalRequest | None, str]:
    try:
        text = Path(path).read_text() if path else sys.stdin.read()
        request = json.loads(text)
    except (OSError, ValueError) as exc:
        return None, f"bad request: cannot read it as JSON ({exc})"
    if not isinstance(request, dict):
        return None, "bad request: expected a JSON object"
    return request, ""  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.worker", description=__doc__.split("\n")[0])
    parser.add_argument("--request", help="request JSON file (default: stdin)")
    parser.add_argument("--response", help="response JSON file (default: stdout)")
    parser.add_argument("--progress", help="file kept holding the current phase and partial response")
    args = parser.parse_args(argv)
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # the candidate's prints (Python and C) go to stderr, never into the answer
    request, problem = _read_request(args.request)
    if request is None:
        response: EvalResponse = {"status": "runtime_error", "message": problem, "seconds": 0.0}
    else:
        response = run_request(request, args.progress)
    text = json.dumps(response, allow_nan=False)
    if args.response:
        tmp = f"{args.response}.tmp"
        Path(tmp).write_text(text)
        os.replace(tmp, args.response)
    else:
        os.write(answer_fd, text.encode() + b"\n")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip the candidate's atexit hooks and stray non-daemon threads
