"""What runs around the models in a verify or profile run: the settings, the strict harness, timing inputs.

Why: both actions read the same request settings (`Settings`, validated once, with KernelBench's
defaults), and strict mode wraps every candidate call the same way (`Harness`: poisoned free memory,
the guards checked, the watcher on, the persisting-L2 limit reset before each L2 flush). The strict
timing rotates several fresh input sets whose reference outputs check every timed call.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

from tools.protocol import EvalRequest, Finding
from tools.worker import compare, dynamic_checks
from tools.worker.compiled import COMPILE_MODES
from tools.worker.correctness import StrictHooks
from tools.worker.guards import check_guards
from tools.worker.inputs import clone_inputs, draw_inputs, set_seed, tensor_bytes
from tools.worker.reporting import Outcome, exception_summary
from tools.worker.rounds import DEFAULT_ROUNDS

BUDGET_SHARE = 0.8  # of the time left that timing may use; the rest is headroom for the answer
TIMING_INPUT_SETS = 4
TIMING_MEMORY_SHARE = 0.25  # input sets and their reference outputs may take this share of free memory


class TimingCheckError(Exception):
    """A timed call's output did not match the reference's output for its input set."""


def run_or_fail(who: str, what: str, fn: Callable[[], Any]) -> Any:
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
        if precision not in compare.PRECISIONS:
            raise Outcome(
                "runtime_error", f"bad request: unknown precision {precision!r} (fp32, fp16 or bf16)"
            )
        self.precision = precision
        self.dtype = compare.PRECISIONS[precision]
        tolerance = compare.tolerance_for_precision(self.dtype)
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
        self.time_reference = bool(request.get("time_reference", True))
        self.timing_rounds = max(1, int(request.get("timing_rounds", DEFAULT_ROUNDS)))
        self.compile_modes: list[str] = [str(m) for m in request.get("compile_modes") or []]
        unknown = [m for m in self.compile_modes if m not in COMPILE_MODES]
        if unknown:
            raise Outcome(
                "runtime_error",
                f"bad request: unknown compile mode(s) {unknown} (choose from {', '.join(COMPILE_MODES)})",
            )
        self.correctness_only = bool(request.get("correctness_only", False))  # a cross-check needs no timing

    def seeded_inputs(self, problem: types.ModuleType, device: torch.device) -> list[Any]:
        """The problem's inputs drawn under the run's seed (the timings' set 0), for one-off calls."""
        set_seed(self.seed)
        return draw_inputs(problem.get_inputs, device, self.inputs_on_device, self.dtype)


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
        # Poison only before the candidate's calls: the reference's outputs never read stale memory
        # on purpose, and each poisoning (empty_cache, a fresh segment, fills) holds the GPU's lock.
        if who == "ModelNew":
            dynamic_checks.poison_free_memory(self.device)
        self.watch.active = who == "ModelNew"

    def after_call(self, who: str = "ModelNew") -> None:
        self.watch.active = False
        check_guards(self.guards)
        if who == "ModelNew":
            self.watch.after_call()

    def hooks(self) -> StrictHooks:
        return StrictHooks(before_call=self.before_call, after_call=self.after_call)

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


def timing_sets(
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
        set_seed(seed)
        inputs = draw_inputs(problem.get_inputs, device, settings.inputs_on_device, settings.dtype)
        set_seed(seed)
        with torch.no_grad():
            out = reference(*clone_inputs(inputs))
        sets.append(inputs)
        outputs.append(out)
        if index == 0:
            with torch.no_grad():  # not reseeded: a forward that draws random numbers answers differently
                again = reference(*clone_inputs(inputs))
            if not compare.compare_outputs(out, again, settings.atol, settings.rtol).ok:
                return [inputs], None
            if budget is not None:
                per_set = max(1, tensor_bytes(inputs) + tensor_bytes(out))
                settings.input_sets = max(1, min(settings.input_sets, int(budget // per_set)))
        index += 1
    return sets, outputs


def output_check(settings: Settings, outputs: list[Any], device: torch.device) -> Callable[[int, Any], None]:
    """The check of every timed call's output (an answer cached by pointer fails here).

    Its buffers are allocated now, before the timed loop (compare.BufferedMatch says why); only a
    call that misses the fast check pays for the full comparison, which words the failure.
    """
    calls = [0]
    matcher = compare.BufferedMatch(outputs, settings.atol, settings.rtol)

    def check(index: int, out: Any) -> None:
        calls[0] += 1
        problem = compare.output_type_problem(out, device)
        if problem is not None:
            raise TimingCheckError(f"timed call {calls[0]}: {problem.reason}")
        if matcher.matches(index, out):
            return
        result = compare.compare_outputs(outputs[index], out, settings.atol, settings.rtol)
        if not result.ok:
            reason = result.problem or f"max abs err {result.max_abs_err:.3g} at {result.where}"
            raise TimingCheckError(
                f"timed call {calls[0]} (input set {index}) gave a wrong output: {reason} "
                "(an answer cached by input pointer, or stale memory?)"
            )

    return check
