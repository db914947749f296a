"""Comparing a candidate's outputs with the reference's: KernelBench's allclose, and the strict checks.

Why: `compare_outputs` is KernelBench's allclose with the precision's tolerance (NaN never matches),
plus where and by how much it misses; the strict harness adds checks on one trial's outputs (plain
tensors only, finite and non-zero where the reference is, the float64 bound on the normalised error:
tools.worker.correctness explains the limits). The torch functions they rely on are bound at import,
before any candidate runs, so a candidate that replaces them does not change the checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

DEFAULT_TOLERANCE = 1e-4  # KernelBench fp32 (since PR #80); fp16/bf16 use 1e-2
PRECISIONS: dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOLERANCES: dict[torch.dtype, float] = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}
NORM_FLOOR = 0.1  # normalised-error floor as a fraction of the precision's tolerance (fp32: 1e-5)
NORM_FACTOR = 16.0  # allowed multiple of the fp32 reference's own normalised error
NORM_SKIP = 1e-2  # a reference this far from its float64 twin is stochastic: the float64 check is skipped

# Bound at import, before any candidate runs: a candidate that replaces them does not change our checks.
_allclose = torch.allclose
_isfinite = torch.isfinite
_vector_norm = torch.linalg.vector_norm
_Tensor = torch.Tensor
_empty_like = torch.empty_like
_sub = torch.sub
_abs = torch.abs
_le = torch.le


def tolerance_for_precision(precision: str | torch.dtype) -> float:
    """KernelBench's get_tolerance_for_precision: fp32 1e-4, fp16 and bf16 1e-2."""
    dtype = PRECISIONS[precision] if isinstance(precision, str) else precision
    if dtype not in TOLERANCES:
        raise ValueError(f"unsupported precision {precision!r} (fp32, fp16 or bf16)")
    return TOLERANCES[dtype]


@dataclass
class Comparison:
    """How one output compares with the reference's output."""

    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    where: str = ""
    worst_excess: float = -math.inf  # how far the worst element is beyond its tolerance (<= 0: within)
    problem: str = ""  # set when the outputs cannot be compared (shape, dtype, structure)


def flatten(output: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, leaf) pairs of a possibly nested tuple/list output; path is '' for a single tensor."""
    if isinstance(output, (tuple, list)):
        pairs: list[tuple[str, Any]] = []
        for i, item in enumerate(output):
            pairs.extend(flatten(item, f"{prefix}[{i}]"))
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
        ok=bool(_allclose(new_w, ref_w, atol=atol, rtol=rtol, equal_nan=False)),
        max_abs_err=float(diff.max().item()),
        max_rel_err=float((diff / ref_w.abs().clamp_min(atol)).max().item()),
        where=_index_text(worst, ref.shape),
        worst_excess=float(excess.reshape(-1)[worst].item()),
    )


def compare_outputs(ref: Any, new: Any, atol: float, rtol: float) -> Comparison:
    """Compare single tensors or (nested) tuples of tensors; `where` names the worst leaf's element."""
    ref_leaves, new_leaves = flatten(ref), flatten(new)
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


# ----------------------------------------------------------------------------------------------
# Strict checks on one trial's outputs
# ----------------------------------------------------------------------------------------------


@dataclass
class StrictProblem:
    """A strict check that failed: a finding id (tools.protocol.Finding) and a reason."""

    id: str
    reason: str


def output_type_problem(new: Any, device: torch.device) -> StrictProblem | None:
    """Outputs must be plain torch.Tensor objects on the device, not subclasses or lazy proxies."""
    for path, leaf in flatten(new):
        if isinstance(leaf, (bool, int, float)) or leaf is None:
            continue
        if type(leaf) is not _Tensor:
            return StrictProblem(
                "lazy_output",
                f"output{path} is a {type(leaf).__module__}.{type(leaf).__qualname__}, not a plain torch.Tensor",
            )
        if leaf.device.type != device.type:
            return StrictProblem("lazy_output", f"output{path} is on {leaf.device}, expected {device.type}")
    return None


def value_problem(ref: Any, new: Any) -> StrictProblem | None:
    """Non-finite values where the reference is finite; an all-zero output where the reference is not."""
    for (path, r), (_, n) in zip(flatten(ref), flatten(new), strict=False):
        if not isinstance(r, torch.Tensor) or not isinstance(n, torch.Tensor) or r.shape != n.shape:
            continue
        if n.is_floating_point() and r.is_floating_point() and n.numel():
            bad = (~_isfinite(n)) & _isfinite(r.to(n.device))
            if bool(bad.any()):
                count = int(bad.sum().item())
                return StrictProblem(
                    "nonfinite_output",
                    f"output{path} has {count} NaN/Inf values where the reference is finite",
                )
        if n.numel() and not bool(n.detach().ne(0).any()) and bool(r.detach().ne(0).any()):
            return StrictProblem("zero_output", f"output{path} is all zeros where the reference is not")
    return None


def normalised_error(out: torch.Tensor, ref64: torch.Tensor) -> float:
    """||out - ref64|| / ||ref64|| in float64 (the absolute norm when the reference is all zeros)."""
    diff = out.detach().to(device=ref64.device, dtype=torch.float64) - ref64
    num = float(_vector_norm(torch.nan_to_num(diff, nan=math.inf)).item())
    den = float(_vector_norm(ref64).item())
    return num / den if den > 0 else num


@dataclass
class Precision:
    """The float64 check of one trial: the candidate's and the fp32 reference's normalised errors."""

    candidate: float = 0.0
    reference: float = 0.0
    allowed: float = 0.0
    skipped: str = ""  # why the check did not apply


def precision_check(ref32: Any, new: Any, ref64: Any, tolerance: float) -> Precision:
    """Worst normalised error over floating output leaves, against the float64 reference."""
    result = Precision(allowed=NORM_FLOOR * tolerance)
    leaves = list(zip(flatten(ref32), flatten(new), flatten(ref64), strict=False))
    for (_, r), (_, n), (_, r64) in leaves:
        if not all(isinstance(t, torch.Tensor) for t in (r, n, r64)):
            continue
        if not (r.is_floating_point() and n.is_floating_point() and r64.is_floating_point()):
            continue
        if r.shape != n.shape or r.shape != r64.shape or r.numel() == 0:
            continue
        r64d = r64.detach().to(torch.float64)
        if not bool(_isfinite(r64d).all()):
            return Precision(skipped="the float64 reference is not finite")
        e_ref = normalised_error(r, r64d)
        if e_ref > NORM_SKIP:
            return Precision(skipped=f"the fp32 reference is {e_ref:.2g} from its float64 twin (stochastic?)")
        result.reference = max(result.reference, e_ref)
        result.candidate = max(result.candidate, normalised_error(n, r64d))
    result.allowed = max(NORM_FLOOR * tolerance, NORM_FACTOR * result.reference)
    return result


def fingerprint(output: Any) -> tuple[float, ...]:
    """A cheap summary that changes whenever an output's values change (sum, sum of squares, a sample)."""
    values: list[float] = []
    for _, leaf in flatten(output):
        if isinstance(leaf, torch.Tensor) and leaf.numel():
            flat = leaf.detach().reshape(-1).to(torch.float64)
            flat = torch.nan_to_num(flat, nan=0.0, posinf=0.0, neginf=0.0)
            step = max(1, flat.numel() // 64)
            values += [float(flat.sum().item()), float((flat * flat).sum().item())]
            values += [float(v) for v in flat[::step][:64].tolist()]
        elif isinstance(leaf, (bool, int, float)):
            values.append(float(leaf))
    return tuple(values)


def all_finite(output: Any) -> bool:
    """Every floating tensor leaf of an output is finite (non-tensor leaves do not count)."""
    return not any(
        isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and not bool(_isfinite(leaf).all())
        for _, leaf in flatten(output)
    )


# ----------------------------------------------------------------------------------------------
# The timed loop's output check
# ----------------------------------------------------------------------------------------------


class BufferedMatch:
    """allclose of a timed call's outputs against the reference's outputs for its input set, with
    every output-sized buffer allocated once, before the timed loop, and shared by the sets.

    Why: `compare_outputs` allocates several output-sized temporaries. In the strict timing loop
    only the candidate's outputs are checked, so only its allocator state churned between calls:
    freed temporaries split the caching allocator's large blocks and the candidate's next output
    could need a fresh cudaMalloc inside its timed window, which eager's call never paid. Here the
    check reuses its buffers (a difference, a bound and a flag tensor per leaf). `matches` is
    conservative: True only when every element is within atol + rtol * |ref| with finite values;
    anything else (infinities, odd structures, a miss) goes to `compare_outputs`, which decides.
    """

    def __init__(self, references: Sequence[Any], atol: float, rtol: float) -> None:
        self.atol, self.rtol = atol, rtol
        self.references = [[leaf for _, leaf in flatten(ref)] for ref in references]
        leaves = self.references[0] if self.references else []
        fast = [
            isinstance(leaf, _Tensor) and leaf.is_floating_point() and leaf.numel() > 0 for leaf in leaves
        ]
        if not _affordable([leaf for leaf, ok in zip(leaves, fast, strict=True) if ok]):
            fast = [False] * len(leaves)  # the timed calls need the memory more: full comparisons
        self.buffers: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None] = [
            (_empty_like(leaf), _empty_like(leaf), _empty_like(leaf, dtype=torch.bool)) if ok else None
            for leaf, ok in zip(leaves, fast, strict=True)
        ]

    def matches(self, index: int, new: Any) -> bool:
        """True when every leaf of `new` is within tolerance of input set `index`'s reference."""
        refs, leaves = self.references[index], [leaf for _, leaf in flatten(new)]
        if len(leaves) != len(refs) or len(refs) != len(self.buffers):
            return False
        for ref, out, buffers in zip(refs, leaves, self.buffers, strict=True):
            if not isinstance(out, _Tensor) or not isinstance(ref, _Tensor) or buffers is None:
                return False
            diff, bound, flags = buffers
            if (out.shape, out.dtype, out.device) != (
                ref.shape,
                ref.dtype,
                ref.device,
            ) or diff.shape != ref.shape:
                return False
            _sub(out, ref, out=diff)
            diff.abs_()
            _abs(ref, out=bound)
            bound.mul_(self.rtol).add_(self.atol)
            _le(diff, bound, out=flags)  # NaN anywhere compares False
            if not bool(flags.all()):
                return False
        return True


BUFFER_MEMORY_SHARE = 0.25  # BufferedMatch's buffers may take this share of a GPU's free memory


def _affordable(leaves: Sequence[torch.Tensor]) -> bool:
    """Whether the buffers for these leaves (two copies and a flag byte each) fit the share of free
    device memory set aside for them, so the timed calls never run short because of the check."""
    need: dict[torch.device, int] = {}
    for leaf in leaves:
        need[leaf.device] = need.get(leaf.device, 0) + leaf.numel() * (2 * leaf.element_size() + 1)
    for device, size in need.items():
        if device.type == "cuda" and size > torch.cuda.mem_get_info(device)[0] * BUFFER_MEMORY_SHARE:
            return False
    return True
