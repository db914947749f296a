"""Correctness of a candidate against its reference, by KernelBench's rules.

Why these rules: results must be comparable with KernelBench's published numbers, so seeding, trial
seeds, training mode, `no_grad` and the fp32 tolerance follow `eval_kernel_against_ref` (see
shared/reference/kernelbench.md). Two deliberate departures, both defences: integer inputs stay
integer (KernelBench HEAD casts them to float, which breaks every index-taking problem) and every
model call gets its own clone of the inputs, so a candidate that writes into its inputs cannot
change what the reference sees.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

DEFAULT_TOLERANCE = 1e-4  # KernelBench fp32 (since PR #80); fp16/bf16 use 1e-2


def set_seed(seed: int) -> None:
    """KernelBench's set_seed: the CPU and every CUDA generator."""
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def trial_seeds(trials: int, seed: int = 42) -> list[int]:
    """One seed per correctness trial, drawn exactly as KernelBench draws them."""
    torch.manual_seed(seed)
    return [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(trials)]


def prepare_inputs(inputs: Sequence[Any], device: torch.device | str) -> list[Any]:
    """Move tensors to `device`; floating tensors become float32, integer and bool ones keep their dtype."""
    prepared: list[Any] = []
    for value in inputs:
        if isinstance(value, torch.Tensor):
            dtype = torch.float32 if value.is_floating_point() else value.dtype
            prepared.append(value.to(device=device, dtype=dtype))
        else:
            prepared.append(value)
    return prepared


def draw_inputs(
    get_inputs: Callable[[], Sequence[Any]], device: torch.device | str, on_device: bool
) -> list[Any]:
    """Call the problem's get_inputs() under the current seed and move the result to `device`.

    on_device: draw directly on a CUDA device (torch's default-device context makes torch.rand
    allocate there), which is many times faster for multi-GB inputs than KernelBench's CPU draw;
    both models still see identical, seeded inputs.
    """
    device = torch.device(device)
    if on_device and device.type == "cuda":
        with device:
            return prepare_inputs(get_inputs(), device)
    return prepare_inputs(get_inputs(), device)


def clone_inputs(inputs: Sequence[Any]) -> list[Any]:
    """A private copy of every tensor input for one model call."""
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]


@dataclass
class Comparison:
    """How one output compares with the reference's output."""

    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    where: str = ""
    worst_excess: float = -math.inf  # how far the worst element is beyond its tolerance (<= 0: within)
    problem: str = ""  # set when the outputs cannot be compared (shape, dtype, structure)


def _flatten(output: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, leaf) pairs of a possibly nested tuple/list output; path is '' for a single tensor."""
    if isinstance(output, (tuple, list)):
        pairs: list[tuple[str, Any]] = []
        for i, item in enumerate(output):
            pairs.extend(_flatten(item, f"{prefix}[{i}]"))
        return pairs
    return [(prefix, output)]


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (bool, int, float)):
        return torch.tensor(value)
    return None


def _index_text(flat_index: int, shape: Sequence[int]) -> str:
    coords = []
    for size in reversed(shape):
        coords.append(flat_index % size)
        flat_index //= size
    return "[" + ", ".join(str(c) for c in reversed(coords)) + "]"


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 (or wider) for floating outputs; float64 keeps integer outputs exact."""
    if dtype.is_floating_point:
        return torch.promote_types(dtype, torch.float32)
    return torch.float64


def compare_tensors(ref: torch.Tensor, new: torch.Tensor, atol: float, rtol: float) -> Comparison:
    """allclose(new, ref) as KernelBench does (NaN never matches), plus where and how badly it misses.

    max_rel_err is |new - ref| / max(|ref|, atol), so elements whose reference is ~0 report an
    absolute error instead of an infinite ratio.
    """
    if tuple(ref.shape) != tuple(new.shape):
        return Comparison(False, problem=f"shape mismatch: expected {list(ref.shape)}, got {list(new.shape)}")
    if ref.dtype != new.dtype:
        return Comparison(False, problem=f"dtype mismatch: expected {ref.dtype}, got {new.dtype}")
    if ref.numel() == 0:
        return Comparison(True)
    work = _work_dtype(ref.dtype)
    ref_w = ref.detach().to(dtype=work)
    new_w = new.detach().to(device=ref.device, dtype=work)
    diff = torch.nan_to_num((new_w - ref_w).abs(), nan=math.inf)  # a NaN anywhere is the worst miss
    excess = diff - (atol + rtol * ref_w.abs())
    excess = torch.nan_to_num(excess, nan=math.inf)
    worst = int(torch.argmax(excess).item())
    return Comparison(
        ok=bool(torch.allclose(new_w, ref_w, atol=atol, rtol=rtol, equal_nan=False)),
        max_abs_err=float(diff.max().item()),
        max_rel_err=float((diff / ref_w.abs().clamp_min(atol)).max().item()),
        where=_index_text(worst, ref.shape),
        worst_excess=float(excess.reshape(-1)[worst].item()),
    )


def compare_outputs(ref: Any, new: Any, atol: float, rtol: float) -> Comparison:
    """Compare single tensors or (nested) tuples of tensors; `where` names the worst leaf's element."""
    ref_leaves, new_leaves = _flatten(ref), _flatten(new)
    if len(ref_leaves) != len(new_leaves):
        return Comparison(
            False,
            problem=f"output structure mismatch: expected {len(ref_leaves)} outputs, got {len(new_leaves)}",
        )
    total = Comparison(True)
    for (path, r), (_, n) in zip(ref_leaves, new_leaves, strict=True):
        rt, nt = _as_tensor(r), _as_tensor(n)
        if rt is None or nt is None:
            if r != n:
                return Comparison(False, problem=f"output{path}: expected {r!r}, got {n!r}")
            continue
        leaf = compare_tensors(rt, nt, atol, rtol)
        if leaf.problem:
            return Comparison(False, problem=f"output{path}: {leaf.problem}" if path else leaf.problem)
        if leaf.worst_excess > total.worst_excess:
            total.worst_excess = leaf.worst_excess
            total.where = f"output{path}{leaf.where}" if path else leaf.where
        total.ok = total.ok and leaf.ok
        total.max_abs_err = max(total.max_abs_err, leaf.max_abs_err)
        total.max_rel_err = max(total.max_rel_err, leaf.max_rel_err)
    return total


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

    @property
    def ok(self) -> bool:
        return self.passed == self.trials

    def to_dict(self) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "passed": self.passed,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "where": self.where,
        }


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
) -> CorrectnessReport:
    """Run both models on `trials` seeded input sets; raises ForwardError if a forward raises.

    strict: the candidate runs before the reference (so it cannot pick up the reference's freed
    output memory) and twice per trial, and both of its answers must match.
    """
    device = torch.device(device)
    report = CorrectnessReport(trials=trials)
    with torch.no_grad():
        for trial, trial_seed in enumerate(trial_seeds(trials, seed), start=1):
            set_seed(trial_seed)
            inputs = draw_inputs(get_inputs, device, inputs_on_device)

            def call(who: str, model: torch.nn.Module, trial: int = trial, inputs: list[Any] = inputs) -> Any:
                try:
                    out = model(*clone_inputs(inputs))
                    _synchronize(device)
                    return out
                except Exception as exc:
                    raise ForwardError(who, trial, exc) from exc

            if strict:
                new_out = call("ModelNew", candidate)
                again = call("ModelNew", candidate)
                ref_out = call("Model", reference)
            else:
                ref_out = call("Model", reference)
                new_out = call("ModelNew", candidate)
                again = None
            result = compare_outputs(ref_out, new_out, atol, rtol)
            if again is not None and result.ok and not compare_outputs(new_out, again, atol, rtol).ok:
                result.ok = False
                result.problem = "two calls on the same inputs gave different outputs"
            report.max_abs_err = max(report.max_abs_err, result.max_abs_err)
            report.max_rel_err = max(report.max_rel_err, result.max_rel_err)
            if result.worst_excess > report.worst_excess and not report.failures:
                report.worst_excess, report.where = result.worst_excess, result.where
            if result.ok:
                report.passed += 1
                continue
            reason = result.problem or (
                f"max abs err {result.max_abs_err:.3g} (max rel {result.max_rel_err:.3g}) at {result.where}, "
                f"tolerance atol=rtol={atol:g}"
            )
            report.failures.append(f"trial {trial}: {reason}")
            if not report.message:
                report.message = f"output differs from the reference on trial {trial}: {reason}"
                report.where = result.where
            if result.problem:  # shape/dtype problems repeat on every trial
                break
    if report.ok:
        report.message = f"matches the reference on {trials} trials (max abs err {report.max_abs_err:.3g})"
    else:
        report.message += f" ({report.passed}/{trials} trials passed)"
    return report
