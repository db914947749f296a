"""The isolated evaluation worker: build, check, time or profile one candidate, answer in JSON.

    python -m tools.worker --request REQ.json --response RESP.json [--progress PROGRESS.json]

Why a separate process: a candidate is code a model wrote; it may crash, hang, corrupt its CUDA
context or patch the harness. `tools.evaluate` runs this module in its own process group with a
time limit, and everything here imports only torch and the standard library so it runs on any CUDA
box. The candidate's prints are moved to stderr, so stdout stays free for the answer when no
--response file is given. --progress names a file that always holds the current phase and the
partial answer, which is what the parent reports when it has to kill us.

Rules: seeded construction of Model and ModelNew (KernelBench's), precision switches pinned
(TF32 off) and guarded, then one of two modes (tools.worker.correctness and tools.worker.timing say why):
- kernelbench: KernelBench's exact methodology (5 trials, reference first on the same tensors,
  allclose by precision; mean of cold-L2 CUDA-event timings);
- strict: cloned and rotated inputs, both call orders, poisoned free memory, a float64 check, a
  sign-randomised trial, every timed output checked, device-wide and host clocks, and the dynamic
  hack checks (tools.worker.dynamic_checks) whose findings the response carries under "findings".
Only the measuring part holds the device lock; builds run in parallel across workers.
"""

from __future__ import annotations

import argparse
import contextlib
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

from tools import build, roofline
from tools.checks import Finding, finding, merge
from tools.problem import ProblemError, exec_problem_source
from tools.protocol import BuildInfo, EvalRequest, EvalResponse, json_safe
from tools.worker import correctness, dynamic_checks, gpu_lock, timing, torch_profile

DEFAULT_ARCH = "sm_90"  # the project's target (H100/H200) when neither the request nor a GPU says
CANDIDATE_FILE = "candidate.py"
PROBLEM_FILE = "problem.py"
BUDGET_SHARE = 0.8  # of the time left that timing may use; the rest is headroom for the answer


class Outcome(Exception):
    """Ends a run early with a final status, a message and the findings that explain it."""

    def __init__(self, status: str, message: str, findings: list[Finding] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.findings = findings or []


class Progress:
    """Keeps <path> holding {"phase", "response"}: what the parent reports if it must kill us."""

    def __init__(self, path: str | None, response: EvalResponse) -> None:
        self.path = path
        self.response = response
        self._phase_started = time.monotonic()

    def __call__(self, phase: str) -> None:
        """Enter `phase`; the time spent in the previous one goes to response["phases"] (seconds)."""
        now = time.monotonic()
        previous = self.response.get("phase")
        if previous:
            phases = self.response.setdefault("phases", {})  # type: ignore[typeddict-item]
            phases[previous] = round(phases.get(previous, 0.0) + now - self._phase_started, 3)
        self._phase_started = now
        self.response["phase"] = phase
        if not self.path:
            return
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as handle:
            json.dump({"phase": phase, "response": json_safe(dict(self.response))}, handle)
        os.replace(tmp, self.path)


_LIBRARY_DIRS = (str(Path(torch.__file__).resolve().parent), str(Path(__file__).resolve().parents[1]))


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


# ----------------------------------------------------------------------------------------------
# Guards: what a candidate must not change
# ----------------------------------------------------------------------------------------------


def _attr(path: str) -> Callable[[], Any]:
    """A getter for a dotted attribute (None when this torch lacks it)."""
    root, *parts = path.split(".")
    base = {"torch": torch, "time": time}[root]

    def get() -> Any:
        value = base
        for part in parts:
            value = getattr(value, part, None)
            if value is None:
                return None
        return value

    return get


_GUARDED_FUNCTIONS = (
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.current_stream", "torch.cuda.empty_cache",
    "torch.cuda.Stream", "time.perf_counter", "time.perf_counter_ns", "time.time", "time.monotonic",
    "torch.allclose", "torch.isclose", "torch.equal", "torch.isfinite", "torch.nan_to_num", "torch.argmax",
    "torch.linalg.vector_norm", "torch.testing.assert_close", "torch.empty", "torch.Tensor",
    "torch.Tensor.__sub__", "torch.Tensor.__eq__", "torch.Tensor.abs", "torch.Tensor.to",
    "torch.Tensor.detach", "torch.Tensor.clone", "torch.Tensor.item", "torch.Tensor.max",
    "torch.Tensor.fill_", "torch.nn.Module.__call__", "torch.set_default_dtype",
)  # fmt: skip
_GUARDED_SETTINGS = (
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
    "torch.backends.cuda.matmul.fp32_precision", "torch.backends.cudnn.conv.fp32_precision",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "torch.backends.cudnn.benchmark", "torch.backends.cudnn.deterministic", "torch.backends.cudnn.enabled",
)  # fmt: skip
_GUARDED: dict[str, Callable[[], Any]] = {
    name: _attr(name) for name in _GUARDED_FUNCTIONS + _GUARDED_SETTINGS
}
_GUARDED["torch.get_float32_matmul_precision()"] = torch.get_float32_matmul_precision
_GUARDED["torch.get_default_dtype()"] = torch.get_default_dtype


def pin_precision() -> None:
    """fp32 means fp32: no TF32 in matmuls or convolutions, for the reference and the candidate."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def snapshot_guards() -> dict[str, Any]:
    return {name: get() for name, get in _GUARDED.items()}


def _changed(name: str, before: Any, now: Any) -> bool:
    """Functions and classes must be the very same objects; settings must keep their values."""
    if name in _GUARDED_SETTINGS or name.endswith("()"):
        return bool(now != before)
    return now is not before


def check_guards(snapshot: dict[str, Any]) -> None:
    changed = [name for name, get in _GUARDED.items() if _changed(name, snapshot[name], get())]
    if changed:
        what = ", ".join(changed)
        raise Outcome(
            "runtime_error",
            f"the candidate changed {what}; the harness's clocks, checks and precision settings must not be patched",
            [finding("patches_harness", "error", f"changed at run time: {what}")],
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
    problem: types.ModuleType,
    candidate: types.ModuleType,
    device: torch.device,
    seed: int,
    dtype: torch.dtype = torch.float32,
    watch: dynamic_checks.Watch | None = None,
) -> tuple:
    """KernelBench's seeding: the same seed before get_init_inputs, Model and ModelNew; both models
    then move to the device and the precision's dtype (`.to(device, dtype)`, as KernelBench does)."""
    if not callable(getattr(candidate, "ModelNew", None)):
        raise Outcome("runtime_error", "the candidate defines no ModelNew class")
    correctness.set_seed(seed)
    init_inputs = correctness.prepare_inputs(problem.get_init_inputs(), device, dtype)
    steps = (("Model", problem.Model), ("ModelNew", candidate.ModelNew))
    models = []
    for who, cls in steps:
        correctness.set_seed(seed)
        running = watch.running() if watch is not None and who == "ModelNew" else contextlib.nullcontext()
        try:
            with torch.no_grad(), running:
                models.append(cls(*init_inputs).to(device=device, dtype=dtype))
        except Exception as exc:
            raise Outcome("runtime_error", f"constructing {who} raised {exception_summary(exc)}") from None
    return models[0], models[1]


# ----------------------------------------------------------------------------------------------
# Actions
# ----------------------------------------------------------------------------------------------

SOL_SLACK = 0.05  # a timed call may not beat the speed-of-light floor by more than this share
SOL_SLACK_MS = 0.002  # ... plus the CUDA events' resolution
EXCESSIVE_SPEEDUP = 10.0  # KernelBench's flag (a note, not a failure)
TIMING_INPUT_SETS = 4
TIMING_MEMORY_SHARE = 0.25  # input sets and their reference outputs may take this share of free memory


def _run_or_fail(who: str, what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (Outcome, TimingCheckError):
        raise
    except Exception as exc:
        raise Outcome(
            "runtime_error", f"{who}.forward raised while {what}: {exception_summary(exc)}"
        ) from None


class Settings:
    """The request's evaluation settings with their defaults, read once."""

    def __init__(self, request: EvalRequest) -> None:
        self.mode = request.get("mode") or "kernelbench"
        if self.mode not in ("kernelbench", "strict"):
            raise Outcome("runtime_error", f"bad request: unknown mode {self.mode!r} (kernelbench or strict)")
        precision = request.get("precision") or "fp32"
        if precision not in correctness.PRECISIONS:
            raise Outcome(
                "runtime_error", f"bad request: unknown precision {precision!r} (fp32, fp16 or bf16)"
            )
        self.precision = precision
        self.dtype = correctness.PRECISIONS[precision]
        tolerance = correctness.tolerance_for_precision(self.dtype)
        self.atol = float(request.get("atol", tolerance))
        self.rtol = float(request.get("rtol", tolerance))
        self.seed = int(request.get("seed", 42))
        self.trials = int(request.get("correctness_trials", 5))
        self.perf_trials = int(request.get("perf_trials", 100))
        self.warmup = int(request.get("warmup", 3))
        self.strict = self.mode == "strict"
        # KernelBench draws on the CPU; strict mode may draw on the device (same seeded values).
        self.inputs_on_device = self.strict and bool(request.get("inputs_on_device", False))
        self.dynamic = bool(request.get("dynamic_checks", self.strict))
        self.input_sets = max(1, int(request.get("timing_input_sets", TIMING_INPUT_SETS)))
        sol = request.get("sol_ms")
        self.sol_ms = float(sol) if sol else None
        self.work = (int(request.get("work_flops") or 0), int(request.get("work_bytes") or 0))
        self.time_reference = bool(request.get("time_reference", True))


class Harness:
    """What strict mode runs around the candidate: guards, the watcher, memory poison, the L2 reset."""

    def __init__(
        self,
        guards: dict[str, Any],
        watch: dynamic_checks.Watch,
        device: torch.device,
        l2_baseline: int | None = None,
    ) -> None:
        self.guards = guards
        self.watch = watch
        self.device = device
        self.l2 = dynamic_checks.PersistingL2(l2_baseline) if device.type == "cuda" else None
        self.notes: list[Finding] = []
        watch.baseline_os_threads()  # the CUDA context exists now: later OS threads are the program's

    def before_call(self, who: str) -> None:
        dynamic_checks.poison_free_memory(self.device)
        self.watch.active = who == "ModelNew"

    def after_call(self, who: str = "ModelNew") -> None:
        self.watch.active = False
        check_guards(self.guards)
        if who == "ModelNew":
            self.watch.after_call()

    def hooks(self) -> correctness.StrictHooks:
        return correctness.StrictHooks(before_call=self.before_call, after_call=self.after_call)

    def watched(self, model: torch.nn.Module) -> Callable[..., Any]:
        """The candidate as a function whose calls the watcher observes."""

        def call(*args: Any) -> Any:
            self.watch.active = True
            try:
                return model(*args)
            finally:
                self.watch.active = False

        return call

    def before_flush(self) -> None:
        if self.l2 is not None:
            self.l2.reset()


def _bytes(values: Any) -> int:
    leaves = values if isinstance(values, (list, tuple)) else [values]
    total = 0
    for leaf in leaves:
        if isinstance(leaf, (list, tuple)):
            total += _bytes(leaf)
        elif isinstance(leaf, torch.Tensor):
            total += leaf.numel() * leaf.element_size()
    return total


class TimingCheckError(Exception):
    """A timed call's output did not match the reference's output for its input set."""


def _timing_sets(
    settings: Settings, problem: types.ModuleType, reference: torch.nn.Module, device: torch.device
) -> tuple[list[list[Any]], list[Any] | None]:
    """Fresh input sets for the timed calls (set 0: KernelBench's seed) and the reference's outputs
    (None when the reference itself does not repeat its answer: a stochastic forward)."""
    sets: list[list[Any]] = []
    outputs: list[Any] = []
    budget = None
    if device.type == "cuda":
        budget = torch.cuda.mem_get_info(device)[0] * TIMING_MEMORY_SHARE
    index = 0
    while index < settings.input_sets:
        seed = settings.seed if index == 0 else settings.seed + 1000 + index
        correctness.set_seed(seed)
        inputs = correctness.draw_inputs(
            problem.get_inputs, device, settings.inputs_on_device, settings.dtype
        )
        correctness.set_seed(seed)
        with torch.no_grad():
            out = reference(*correctness.clone_inputs(inputs))
        sets.append(inputs)
        outputs.append(out)
        if index == 0:
            with torch.no_grad():  # not reseeded: a forward that draws random numbers answers differently
                again = reference(*correctness.clone_inputs(inputs))
            if not correctness.compare_outputs(out, again, settings.atol, settings.rtol).ok:
                return [inputs], None
            if budget is not None:
                per_set = max(1, _bytes(inputs) + _bytes(out))
                settings.input_sets = max(1, min(settings.input_sets, int(budget // per_set)))
        index += 1
    return sets, outputs


def _output_check(settings: Settings, outputs: list[Any], device: torch.device) -> Callable[[int, Any], None]:
    calls = [0]

    def check(index: int, out: Any) -> None:
        calls[0] += 1
        problem = correctness.output_type_problem(out, device)
        if problem is not None:
            raise TimingCheckError(f"timed call {calls[0]}: {problem.reason}")
        result = correctness.compare_outputs(outputs[index], out, settings.atol, settings.rtol)
        if not result.ok:
            reason = result.problem or f"max abs err {result.max_abs_err:.3g} at {result.where}"
            raise TimingCheckError(
                f"timed call {calls[0]} (input set {index}) gave a wrong output: {reason} "
                "(an answer cached by input pointer, or stale memory?)"
            )

    return check


def work_floor_ms(work: tuple[int, int], gpu: str) -> float | None:
    """The physical floor for (FLOPs, bytes) on `gpu`, or None without work figures or known ceilings."""
    flops, nbytes = work
    ceilings = roofline.known_ceilings(gpu)
    if ceilings is None or (flops <= 0 and nbytes <= 0):
        return None
    return roofline.floor_ms(flops, nbytes, ceilings)


def _timing_findings(info: dict[str, Any], sol_ms: float | None) -> list[Finding]:
    """What the timing shows: escaped work, disagreeing clocks, a call below the physical floor."""
    found: list[Finding] = []
    stats = info.get("candidate", {})
    if stats.get("off_stream"):
        found.append(
            finding(
                "off_stream_work",
                "error",
                f"work escaped the current stream: {stats['stream_mean_ms']:.4g} ms on the stream's events, "
                f"{stats['device_wide_mean_ms']:.4g} ms until the device was idle (the latter is reported)",
            )
        )
    if stats.get("clock_disagreement"):
        found.append(
            finding(
                "clock_disagreement",
                "warning",
                f"CUDA events ({stats['device_wide_mean_ms']:.4g} ms) and the host clock "
                f"({stats['host_mean_ms']:.4g} ms) disagree",
            )
        )
    if sol_ms and stats:
        floor = sol_ms * (1.0 - SOL_SLACK) - SOL_SLACK_MS
        if stats["min_ms"] < floor:
            found.append(
                finding(
                    "impossible_speed",
                    "error",
                    f"a timed call took {stats['min_ms']:.4g} ms, below the speed-of-light floor of "
                    f"{sol_ms:.4g} ms: the work did not happen inside the timed window",
                )
            )
    if info.get("eager_ms") and info.get("candidate_ms"):
        speedup = info["eager_ms"] / info["candidate_ms"]
        if speedup > EXCESSIVE_SPEEDUP:
            found.append(
                finding(
                    "excessive_speedup",
                    "info",
                    f"{speedup:.1f}x faster than eager (KernelBench flags more than {EXCESSIVE_SPEEDUP:g}x)",
                )
            )
    return found


def verify(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple,
    device: torch.device,
    deadline: float,
    harness: Harness,
    findings: list[Finding],
) -> None:
    settings = Settings(request)
    reference, candidate = models
    progress("checking correctness")
    try:
        report = correctness.check_correctness(
            reference,
            candidate,
            problem.get_inputs,
            device,
            trials=settings.trials,
            seed=settings.seed,
            atol=settings.atol,
            rtol=settings.rtol,
            strict=settings.strict,
            inputs_on_device=settings.inputs_on_device,
            dtype=settings.dtype,
            hooks=harness.hooks() if settings.strict else None,
        )
    except correctness.ForwardError as exc:
        raise Outcome(
            "runtime_error",
            f"{exc.who}.forward raised on correctness trial {exc.trial}: {exception_summary(exc.error)}",
        ) from None
    findings.extend(report.findings)
    response["correctness"] = report.to_dict()  # type: ignore[typeddict-item]
    if not report.ok:
        raise Outcome("wrong_output", report.message)

    if settings.strict:
        info = _time_strict(settings, progress, problem, models, device, deadline, harness)
    else:
        info = _time_kernelbench(settings, progress, problem, models, device, deadline)
    sol_ms = settings.sol_ms
    if sol_ms is None and device.type == "cuda":  # no floor given: derive it from the plan's work
        sol_ms = work_floor_ms(settings.work, torch.cuda.get_device_name(device))
    findings.extend(_timing_findings(info, sol_ms))
    if settings.dynamic and device.type == "cuda":
        _profile_checks(response, progress, models, device, harness, findings, info.get("_sets"))
    info.pop("_sets", None)
    response["timing"] = info  # type: ignore[typeddict-item]
    message = f"correct on {report.trials} trials; {info['candidate_ms']:.4g} ms"
    if "eager_ms" in info:
        speedup = info["eager_ms"] / info["candidate_ms"] if info["candidate_ms"] > 0 else math.inf
        message += f" vs eager {info['eager_ms']:.4g} ms ({speedup:.2f}x)"
    cut = [k for k in ("candidate", "eager") if k in info and info[k]["trials"] < settings.perf_trials]
    if cut:
        message += f"; fewer timed calls than asked ({', '.join(cut)}) to fit the time limit"
    response["message"] = message


def _time_kernelbench(
    settings: Settings,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple,
    device: torch.device,
    deadline: float,
) -> dict[str, Any]:
    """KernelBench's timing: one CPU draw under the seed, same tensors every call, grad mode on."""
    reference, candidate = models
    timed = [("ModelNew", candidate, "candidate")]
    if settings.time_reference:
        timed.append(("Model", reference, "eager"))
    info: dict[str, Any] = {}
    for index, (who, model, key) in enumerate(timed):
        progress(f"timing {who}")
        correctness.set_seed(settings.seed)
        inputs = correctness.prepare_inputs(problem.get_inputs(), device, settings.dtype)
        budget = max(1.0, (deadline - time.monotonic()) * BUDGET_SHARE / (len(timed) - index))
        stats = _run_or_fail(
            who,
            "being timed",
            lambda m=model, x=inputs, b=budget: timing.time_kernelbench(
                m, x, device, settings.warmup, settings.perf_trials, b
            ),
        )
        info[key] = stats
        info[f"{key}_ms"] = stats["mean_ms"]
        info["_sets"] = [inputs]
    return info


def _time_strict(
    settings: Settings,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple,
    device: torch.device,
    deadline: float,
    harness: Harness,
) -> dict[str, Any]:
    """The strict timing: rotated input sets, every output checked, device-wide and host clocks."""
    reference, candidate = models
    progress("drawing the timing inputs")
    sets, outputs = _run_or_fail(
        "Model", "drawing the timing inputs", lambda: _timing_sets(settings, problem, reference, device)
    )
    check = _output_check(settings, outputs, device) if outputs is not None else None
    if outputs is None:
        harness.notes.append(
            finding(
                "timing_output_check_skipped",
                "info",
                "the reference is stochastic: timed outputs not checked",
            )
        )
    timed: list[tuple[str, Callable[..., Any], str]] = [("ModelNew", harness.watched(candidate), "candidate")]
    if settings.time_reference:
        timed.append(("Model", reference, "eager"))
    info: dict[str, Any] = {}
    for index, (who, fn, key) in enumerate(timed):
        progress(f"timing {who}")
        budget = max(1.0, (deadline - time.monotonic()) * BUDGET_SHARE / (len(timed) - index))
        is_candidate = who == "ModelNew"
        try:
            stats = _run_or_fail(
                who,
                "being timed",
                lambda f=fn, b=budget, c=is_candidate: timing.time_strict(
                    f,
                    sets,
                    device,
                    settings.warmup,
                    settings.perf_trials,
                    b,
                    check=check if c and check is not None else None,
                    after_call=(lambda: harness.after_call("ModelNew")) if c else None,
                    before_flush=harness.before_flush,
                ),
            )
        except TimingCheckError as exc:
            raise Outcome(
                "wrong_output", str(exc), [finding("timing_output_mismatch", "error", str(exc))]
            ) from None
        info[key] = stats
        info[f"{key}_ms"] = stats["mean_ms"]
    del outputs
    info["_sets"] = sets
    return info


def _profile_checks(
    response: EvalResponse,
    progress: Progress,
    models: tuple,
    device: torch.device,
    harness: Harness,
    findings: list[Finding],
    sets: list[list[Any]] | None,
) -> None:
    """Profile both models once: which kernels really ran, and the operator coverage."""
    reference, candidate = models
    if not sets:
        return
    own = set(response.get("build", {}).get("kernels", []))
    progress("profiling for the hack checks")
    cand = _run_or_fail(
        "ModelNew",
        "profiled",
        lambda: dynamic_checks.profile_split(harness.watched(candidate), sets[0], device, own),
    )
    check_guards(harness.guards)  # not the OS-thread watch: the profiler starts threads of its own
    ref = _run_or_fail(
        "Model", "profiled", lambda: dynamic_checks.profile_split(reference, sets[0], device, ())
    )
    findings.extend(dynamic_checks.profile_findings(cand, own))
    response["operator_coverage"] = dynamic_checks.coverage(cand, ref)
    response["profile_split"] = {"candidate": cand, "reference": ref}  # type: ignore[typeddict-unknown-key]


def profile(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple,
    device: torch.device,
) -> None:
    settings = Settings(request)
    reference, candidate = models
    correctness.set_seed(settings.seed)
    inputs = correctness.draw_inputs(problem.get_inputs, device, settings.inputs_on_device, settings.dtype)
    own = set(response.get("build", {}).get("kernels", []))
    progress("profiling ModelNew")
    info = _run_or_fail(
        "ModelNew", "profiled", lambda: torch_profile.profile_forward(candidate, inputs, device, own)
    )
    if request.get("profile_reference", False):
        progress("profiling Model")
        info["reference"] = _run_or_fail(
            "Model",
            "profiled",
            lambda: torch_profile.profile_forward(reference, inputs, device, (), own_is_outside_ops=False),
        )
        if device.type == "cuda":
            cand = _run_or_fail(
                "ModelNew", "profiled", lambda: dynamic_checks.profile_split(candidate, inputs, device, own)
            )
            ref = _run_or_fail(
                "Model", "profiled", lambda: dynamic_checks.profile_split(reference, inputs, device, ())
            )
            response["operator_coverage"] = dynamic_checks.coverage(cand, ref)
            response["findings"] = dynamic_checks.profile_findings(cand, own)
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


def _run(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    started: float,
    findings: list[Finding],
) -> None:
    action = request.get("action", "verify")
    if action not in ("verify", "profile", "build"):
        raise Outcome("runtime_error", f"bad request: unknown action {action!r} (verify, profile or build)")
    device_kind = request.get("device", "cuda")
    if device_kind not in ("cuda", "cpu"):
        raise Outcome("runtime_error", f"bad request: unknown device {device_kind!r} (cuda or cpu)")
    settings = Settings(request)  # validates mode and precision before anything is built
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
    watch = dynamic_checks.Watch()
    l2_baseline = None
    if action != "build" and device_kind == "cuda" and torch.cuda.is_available():
        l2_baseline = dynamic_checks.persisting_l2_limit()  # before the program can touch it
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
    if device.type == "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    response["device"] = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    assert problem is not None
    check_guards(guards)  # import-time patches
    progress("waiting for the device lock")
    with gpu_lock.exclusive(gpu_lock.lock_path(cache_dir, device.type)):
        progress("constructing the models")
        models = construct(problem, candidate, device, settings.seed, settings.dtype, watch)
        check_guards(guards)
        pin_precision()
        harness = Harness(guards, watch, device, l2_baseline)
        try:
            if action == "verify":
                verify(request, response, progress, problem, models, device, deadline, harness, findings)
            else:
                profile(request, response, progress, problem, models, device)
        finally:
            findings.extend(watch.findings())
            if harness.l2 is not None:
                findings.extend(harness.l2.findings())
            findings.extend(harness.notes)
        check_guards(guards)


def run_request(request: EvalRequest, progress_path: str | None = None) -> EvalResponse:
    """Answer one request; never raises (harness failures become runtime_error with 'worker error')."""
    started = time.monotonic()
    response: EvalResponse = {"status": "passed", "message": "", "device": ""}
    progress = Progress(progress_path, response)
    progress("starting")
    build.clear_build_records()
    outcome = Outcome("passed", "")
    findings: list[Finding] = []
    try:
        _run(request, response, progress, started, findings)
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
    all_findings = merge(response.get("findings", []), findings, outcome.findings)
    if all_findings or request.get("mode") == "strict":
        response["findings"] = all_findings  # type: ignore[typeddict-item]
    last_phase = response.get("phase", "")
    progress("done")  # closes the last phase's timing
    response["phase"] = "done" if response["status"] == "passed" else last_phase
    response["seconds"] = round(time.monotonic() - started, 3)
    return json_safe(response)


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
