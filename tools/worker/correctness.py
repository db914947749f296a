"""Correctness of a candidate against its reference: KernelBench's rules, or the strict harness.

Why two modes: our numbers must be comparable with KernelBench's published ones, so `kernelbench`
mode follows `eval_kernel_against_ref` exactly (docs/kernelbench.md §2): trial seeds
drawn from `manual_seed(seed)`, inputs drawn on the CPU under the trial seed, the seed set again,
the reference run first and the candidate second on the *same* tensors, `allclose` with the
precision's tolerance (fp32 1e-4, fp16/bf16 1e-2), every trial must pass. The one departure is
KernelBench's bug #151: integer and bool inputs stay integer.

But KernelBench's rules can be fooled (§4 of the notes), so `strict` mode, our default, adds:
- every model call gets its own clone of the inputs, and freed device memory is poisoned (NaN
  bytes) before every call, so stale memory never holds a previous answer;
- the candidate runs first in odd trials and second in even ones, and twice per trial (the two
  answers must agree: determinism);
- outputs must be plain tensors (no lazy subclasses), finite where the reference is finite, not
  all-zero where the reference is not, and must change across trials when the reference's do;
- a float64 reference (the reference model and inputs upcast) bounds the normalised error
  ||out - ref64|| / ||ref64||: the limit is max(NORM_FLOOR x tolerance, NORM_FACTOR x the fp32
  reference's own error), so a candidate may be at most 16x less accurate than PyTorch's fp32
  implementation, and never needs to beat 1e-5 (fp32). fp32 arithmetic meets this easily; fp16,
  bf16 or TF32 rounding (about 3e-4 relative per element) does not;
- one extra trial with the inputs' signs randomised (a seeded +-1 mask), because KernelBench draws
  inputs from U[0, 1): on positive inputs ReLU is the identity and lower-precision GEMMs average
  their rounding away. The trial is skipped when the reference is not finite on such inputs.

This module runs the trials; the inputs come from tools.worker.inputs and the comparisons from
tools.worker.compare (re-exported here, since callers reach them as `correctness.<name>`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from tools.protocol import Finding, finding
from tools.worker.compare import (
    DEFAULT_TOLERANCE,
    PRECISIONS,
    TOLERANCES,
    Comparison,
    StrictProblem,
    all_finite,
    compare_outputs,
    compare_tensors,
    fingerprint,
    output_type_problem,
    precision_check,
    tolerance_for_precision,
    value_problem,
)
from tools.worker.inputs import (
    clone_inputs,
    draw_inputs,
    prepare_inputs,
    set_seed,
    signed_inputs,
    trial_seeds,
    upcast_inputs,
)

__all__ = [  # the trials, and the input and comparison helpers callers reach through this module
    "DEFAULT_TOLERANCE",
    "PRECISIONS",
    "TOLERANCES",
    "Comparison",
    "CorrectnessReport",
    "ForwardError",
    "StrictHooks",
    "StrictProblem",
    "check_correctness",
    "clone_inputs",
    "compare_outputs",
    "compare_tensors",
    "draw_inputs",
    "make_reference64",
    "output_type_problem",
    "prepare_inputs",
    "set_seed",
    "signed_inputs",
    "tolerance_for_precision",
    "trial_seeds",
]

_equal = torch.equal  # bound at import, before any candidate runs (as tools.worker.compare binds its own)


def make_reference64(model: torch.nn.Module) -> torch.nn.Module | None:
    """A float64 copy of the reference (made before it first runs); None when it cannot be copied."""
    try:
        return copy.deepcopy(model).to(torch.float64)
    except Exception:
        return None


class ForwardError(Exception):
    """A model's forward raised during the correctness trials (`who` is 'Model' or 'ModelNew')."""

    def __init__(self, who: str, trial: int, error: BaseException) -> None:
        self.who = who
        self.trial = trial
        self.error = error
        super().__init__(
            f"{who}.forward raised on correctness trial {trial}: {type(error).__name__}: {error}"
        )


@dataclass
class CorrectnessReport:
    """The outcome of all trials; `message` explains the first failing trial."""

    trials: int
    passed: int = 0
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    where: str = ""
    message: str = ""
    failures: list[str] = field(default_factory=list)
    worst_excess: float = -math.inf
    mode: str = "kernelbench"
    norm_err: float | None = None  # strict: worst normalised error against the float64 reference
    norm_allowed: float | None = None  # strict: the limit that applied in that trial
    ref_norm_err: float | None = None  # strict: the fp32 reference's own normalised error
    signed_trial: str = ""  # strict: "passed", "failed" or "skipped: why"
    findings: list[Finding] = field(default_factory=list)  # strict: named failures and notes

    @property
    def ok(self) -> bool:
        return self.passed == self.trials and not self.failures

    def to_dict(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "trials": self.trials,
            "passed": self.passed,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "where": self.where,
            "mode": self.mode,
        }
        if self.mode == "strict":
            info.update(
                norm_err=self.norm_err,
                norm_allowed=self.norm_allowed,
                ref_norm_err=self.ref_norm_err,
                signed_trial=self.signed_trial,
            )
        return info

    def note(self, id_: str, severity: str, evidence: str) -> None:
        item = finding(id_, severity, evidence)
        if item not in self.findings:
            self.findings.append(item)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class StrictHooks:
    """What the worker runs around every model call in strict mode (poison memory, check guards)."""

    before_call: Callable[[str], None] = lambda who: None
    after_call: Callable[[str], None] = lambda who: None


def check_correctness(
    reference: torch.nn.Module,
    candidate: torch.nn.Module,
    get_inputs: Callable[[], Sequence[Any]],
    device: torch.device | str,
    trials: int = 5,
    seed: int = 42,
    atol: float = DEFAULT_TOLERANCE,
    rtol: float = DEFAULT_TOLERANCE,
    strict: bool = False,
    inputs_on_device: bool = False,
    *,
    dtype: torch.dtype = torch.float32,
    hooks: StrictHooks | None = None,
    signed_trial: bool = True,
    float64_check: bool = True,
) -> CorrectnessReport:
    """Run both models on `trials` seeded input sets; raises ForwardError if a forward raises.

    strict=False is KernelBench's procedure (inputs drawn on the CPU, not cloned, reference first);
    strict=True is the strict harness described in the module docstring (its float64 reference is
    a copy of `reference` taken here, before the reference first runs).
    """
    device = torch.device(device)
    if not strict:
        return _check_kernelbench(reference, candidate, get_inputs, device, trials, seed, atol, rtol, dtype)
    reference64 = make_reference64(reference) if float64_check else None
    run = _StrictRun(
        reference,
        candidate,
        get_inputs,
        device,
        trials,
        seed,
        atol,
        rtol,
        inputs_on_device,
        dtype,
        reference64,
        hooks or StrictHooks(),
    )
    if float64_check and reference64 is None:
        run.report.note(
            "float64_reference_unavailable", "info", "the reference could not be copied to float64"
        )
    return run.run(signed_trial)


def _record(report: CorrectnessReport, trial: int, result: Comparison, reason: str = "") -> None:
    report.max_abs_err = max(report.max_abs_err, result.max_abs_err)
    report.max_rel_err = max(report.max_rel_err, result.max_rel_err)
    if result.worst_excess > report.worst_excess and not report.failures:
        report.worst_excess, report.where = result.worst_excess, result.where
    if result.ok and not reason:
        report.passed += 1
        return
    reason = (
        reason
        or result.problem
        or (f"max abs err {result.max_abs_err:.3g} (max rel {result.max_rel_err:.3g}) at {result.where}")
    )
    label = f"trial {trial}" if trial > 0 else "the signed-input trial"
    report.failures.append(f"{label}: {reason}")
    if not report.message:
        report.message = f"output differs from the reference on {label}: {reason}"
        if result.where:
            report.where = result.where


def _finish(report: CorrectnessReport, atol: float) -> CorrectnessReport:
    if report.ok:
        report.message = (
            f"matches the reference on {report.trials} trials (max abs err {report.max_abs_err:.3g})"
        )
    else:
        report.message += f" (tolerance atol=rtol={atol:g}; {report.passed}/{report.trials} trials passed)"
    return report


def _check_kernelbench(
    reference: torch.nn.Module,
    candidate: torch.nn.Module,
    get_inputs: Callable[[], Sequence[Any]],
    device: torch.device,
    trials: int,
    seed: int,
    atol: float,
    rtol: float,
    dtype: torch.dtype,
) -> CorrectnessReport:
    """KernelBench's run_and_check_correctness, step for step (integer inputs kept integer)."""
    report = CorrectnessReport(trials=trials, mode="kernelbench")
    with torch.no_grad():
        for trial, trial_seed in enumerate(trial_seeds(trials, seed), start=1):
            set_seed(trial_seed)
            inputs = prepare_inputs(get_inputs(), device, dtype)  # drawn on the CPU, then moved
            set_seed(trial_seed)
            try:
                ref_out = reference(*inputs)
                _synchronize(device)
            except Exception as exc:
                raise ForwardError("Model", trial, exc) from exc
            try:
                new_out = candidate(*inputs)
                _synchronize(device)
            except Exception as exc:
                raise ForwardError("ModelNew", trial, exc) from exc
            result = compare_outputs(ref_out, new_out, atol, rtol)
            _record(report, trial, result)
            if result.problem:  # shape/dtype problems repeat on every trial
                break
    return _finish(report, atol)


class _StrictRun:
    """One strict correctness check (see the module docstring)."""

    def __init__(
        self,
        reference: torch.nn.Module,
        candidate: torch.nn.Module,
        get_inputs: Callable[[], Sequence[Any]],
        device: torch.device,
        trials: int,
        seed: int,
        atol: float,
        rtol: float,
        inputs_on_device: bool,
        dtype: torch.dtype,
        reference64: torch.nn.Module | None,
        hooks: StrictHooks,
    ) -> None:
        self.models = {"Model": reference, "ModelNew": candidate}
        self.get_inputs = get_inputs
        self.device = device
        self.trials = trials
        self.seed = seed
        self.atol, self.rtol = atol, rtol
        self.inputs_on_device = inputs_on_device
        self.dtype = dtype
        self.reference64 = reference64
        self.hooks = hooks
        self.tolerance = max(atol, rtol)
        self.report = CorrectnessReport(trials=trials, mode="strict")
        self.fingerprints: dict[str, list[tuple[float, ...]]] = {"Model": [], "ModelNew": []}
        self.ref_mutates = False

    def call(self, who: str, trial: int, inputs: list[Any], trial_seed: int) -> Any:
        """Poison, reseed, clone, call, synchronize, check guards; note writes into the inputs."""
        self.hooks.before_call(who)
        set_seed(trial_seed)
        args = clone_inputs(inputs)
        try:
            out = self.models[who](*args)
            _synchronize(self.device)
        except Exception as exc:
            raise ForwardError(who, trial or self.trials + 1, exc) from exc
        self.hooks.after_call(who)
        changed = any(
            isinstance(a, torch.Tensor) and (a.shape != i.shape or not _equal(a, i))
            for a, i in zip(args, inputs, strict=False)
            if isinstance(i, torch.Tensor)
        )
        if changed and who == "Model":
            self.ref_mutates = True
        elif changed and not self.ref_mutates:
            self.report.note(
                "mutates_inputs", "warning", f"ModelNew wrote into its input tensors (trial {trial})"
            )
        return out

    def call64(self, trial: int, inputs: list[Any], trial_seed: int) -> Any:
        """The float64 reference on upcast inputs, or None when it cannot run (a note says why)."""
        if self.reference64 is None:
            return None
        set_seed(trial_seed)
        previous = torch.get_default_dtype()
        try:
            torch.set_default_dtype(torch.float64)  # factories inside forward make float64 too
            out = self.reference64(*upcast_inputs(inputs))
            _synchronize(self.device)
        except Exception as exc:
            self.report.note(
                "float64_reference_unavailable",
                "info",
                f"the float64 reference raised {type(exc).__name__}: {str(exc).splitlines()[0][:160]}",
            )
            self.reference64 = None
            return None
        finally:
            torch.set_default_dtype(previous)
        return out

    def trial(
        self, trial: int, trial_seed: int, inputs: list[Any]
    ) -> tuple[Comparison, StrictProblem | None]:
        """Both models on one input set, in this trial's order; the first strict problem found."""
        order = ("ModelNew", "Model") if trial % 2 else ("Model", "ModelNew")
        outs = {who: self.call(who, trial, inputs, trial_seed) for who in order}
        ref, new = outs["Model"], outs["ModelNew"]
        problem = output_type_problem(new, self.device)
        if problem is not None:  # never touch a foreign object further: it could run code
            return Comparison(False), problem
        again = self.call("ModelNew", trial, inputs, trial_seed)
        result = compare_outputs(ref, new, self.atol, self.rtol)
        if not result.problem:
            problem = value_problem(ref, new)
        if problem is None and result.ok:
            ref64 = self.call64(trial, inputs, trial_seed)
            if ref64 is not None:
                problem = self.precision(ref, new, ref64, trial)
        # Also when the first call was wrong: a program off on alternate calls is caught either way.
        if problem is None and not compare_outputs(new, again, self.atol, self.rtol).ok:
            problem = StrictProblem("nondeterministic", "two calls on the same inputs gave different outputs")
        if trial > 0:
            self.fingerprints["Model"].append(fingerprint(ref))
            self.fingerprints["ModelNew"].append(fingerprint(new))
        return result, problem

    def precision(self, ref: Any, new: Any, ref64: Any, trial: int) -> StrictProblem | None:
        check = precision_check(ref, new, ref64, self.tolerance)
        report = self.report
        if check.skipped:
            report.note("float64_check_skipped", "info", f"trial {trial}: {check.skipped}")
            return None
        if report.norm_err is None or check.candidate > report.norm_err:
            report.norm_err, report.norm_allowed = check.candidate, check.allowed
        report.ref_norm_err = max(report.ref_norm_err or 0.0, check.reference)
        if check.candidate > check.allowed:
            return StrictProblem(
                "precision_loss",
                f"normalised error {check.candidate:.3g} against a float64 reference exceeds {check.allowed:.3g} "
                f"(PyTorch's fp32 reference: {check.reference:.3g}): lower-precision arithmetic?",
            )
        return None

    def fail(self, trial: int, result: Comparison, problem: StrictProblem | None) -> bool:
        """Record a trial; True when it failed."""
        reason = problem.reason if problem else ""
        if problem is not None:
            self.report.note(
                problem.id, "error", f"{'trial ' + str(trial) if trial else 'signed trial'}: {reason}"
            )
        failed_before = len(self.report.failures)
        _record(self.report, trial, result, reason)
        return len(self.report.failures) > failed_before

    def run(self, signed_trial: bool) -> CorrectnessReport:
        with torch.no_grad():
            for trial, trial_seed in enumerate(trial_seeds(self.trials, self.seed), start=1):
                set_seed(trial_seed)
                inputs = draw_inputs(self.get_inputs, self.device, self.inputs_on_device, self.dtype)
                result, problem = self.trial(trial, trial_seed, inputs)
                if self.fail(trial, result, problem) and result.problem:
                    break  # shape/dtype problems repeat on every trial
            self.constant_check()
            if signed_trial and not self.report.failures:
                self.signed(trial_seeds(self.trials + 1, self.seed)[-1])
        return _finish(self.report, self.atol)

    def constant_check(self) -> None:
        ref, new = self.fingerprints["Model"], self.fingerprints["ModelNew"]
        if len(new) < 2:
            return
        if len(set(ref)) == 1:
            self.report.note(
                "reference_constant",
                "info",
                "the reference's output did not change across trials (problem defect?)",
            )
        elif len(set(new)) == 1:
            reason = "the output does not change when the inputs do (the reference's does)"
            self.report.note("constant_output", "error", reason)
            self.report.failures.append(reason)
            if not self.report.message:
                self.report.message = f"output differs from the reference: {reason}"

    def signed(self, trial_seed: int) -> None:
        """One more trial on sign-randomised inputs (skipped when the reference is not finite there)."""
        set_seed(trial_seed)
        base = draw_inputs(self.get_inputs, self.device, self.inputs_on_device, self.dtype)
        inputs = signed_inputs(base, trial_seed)
        if all(not (isinstance(v, torch.Tensor) and v.is_floating_point()) for v in inputs):
            self.report.signed_trial = "skipped: no floating inputs"
            return
        try:
            set_seed(trial_seed)
            probe = self.models["Model"](*clone_inputs(inputs))
            _synchronize(self.device)
        except Exception as exc:
            self.report.signed_trial = f"skipped: the reference raised {type(exc).__name__} on such inputs"
            return
        if not all_finite(probe):
            self.report.signed_trial = "skipped: the reference is not finite on sign-randomised inputs"
            return
        del probe
        result, problem = self.trial(0, trial_seed, inputs)
        self.report.signed_trial = "failed" if self.fail(0, result, problem) else "passed"
        if self.report.signed_trial == "passed":
            self.report.passed -= 1  # the extra trial does not count among the requested ones
