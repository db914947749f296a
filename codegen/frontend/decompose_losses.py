"""Norms, distances and losses written out as elementwise ops and reductions, while the tracer records.

Why: `torch.norm`, `F.normalize`, `F.smooth_l1_loss`, `nn.TripletMarginLoss`, ... are one opaque
call each, left to PyTorch. Each is a short chain of elementwise math around one or two reductions,
which the fusion planner already turns into our kernels (the chain fused as the reduction's prologue
or epilogue). Each function follows PyTorch's own formula (ATen's loss and norm code) operation by
operation, so the rounding matches where the math is the same; docs/operators.md lists where it
differs. Variants not written out (legacy `size_average`/`reduce`, class weights, label smoothing,
matrix norms, other dtypes) return NotImplemented, and the tracer records the call as one node,
which the plan lists as uncovered with its name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from codegen.emit.runtime import _stitch_nll_pick
from codegen.frontend.trace_values import dtype_of, is_f32, rank_of, shape_of

_REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss: Any, reduction: str) -> Any:
    if reduction == "mean":
        return torch.mean(loss)
    if reduction == "sum":
        return torch.sum(loss)
    return loss


def _legacy(size_average: Any, reduce: Any) -> bool:
    """The deprecated size_average/reduce arguments (not written out)."""
    return size_average is not None or reduce is not None


def _dims(tracer: fx.Tracer, x: Any, dim: Any) -> tuple[int, ...] | None:
    """`dim` as a tuple of non-negative dims (None: all dims), or None when it is not constant."""
    rank = rank_of(tracer, x)
    if dim is None:
        return tuple(range(rank))
    items = (dim,) if isinstance(dim, int) else dim
    if not isinstance(items, (list, tuple)) or not all(isinstance(d, int) for d in items):
        return None
    return tuple(d % max(rank, 1) for d in items)


def vector_norm(tracer: fx.Tracer, x: Any, p: Any, dim: Any, keepdim: bool) -> Any:
    """The p-norm of `x` over `dim` (all dims when None), as PyTorch's norm kernels compute it:
    sqrt of the sum of squares for p = 2, the sum or max of |x| for p = 1 and inf, else
    sum(|x|^p)^(1/p)."""
    dims = _dims(tracer, x, dim)
    if (
        dims is None
        or not isinstance(p, (int, float))
        or isinstance(p, bool)
        or p == 0
        or not is_f32(tracer, x)
    ):
        return NotImplemented
    if not isinstance(keepdim, bool):
        return NotImplemented
    if p == 2:
        return torch.sqrt(torch.sum(x * x, dim=dims, keepdim=keepdim))
    magnitude = torch.abs(x)
    if p == 1:
        return torch.sum(magnitude, dim=dims, keepdim=keepdim)
    if p == math.inf:
        return torch.amax(magnitude, dim=dims, keepdim=keepdim)
    if p == -math.inf:
        return torch.amin(magnitude, dim=dims, keepdim=keepdim)
    return torch.pow(torch.sum(torch.pow(magnitude, p), dim=dims, keepdim=keepdim), 1.0 / p)


def norm(
    tracer: fx.Tracer,
    input: Any,
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    out: Any = None,
    dtype: Any = None,
) -> Any:
    """`torch.norm` / `Tensor.norm`: Frobenius and vector p-norms (not the nuclear norm)."""
    if out is not None or dtype is not None:
        return NotImplemented
    if p == "fro":
        if isinstance(dim, (list, tuple)) and len(dim) > 2:
            return NotImplemented
        p = 2
    if isinstance(p, str):
        return NotImplemented
    return vector_norm(tracer, input, p, dim, keepdim)


def linalg_vector_norm(
    tracer: fx.Tracer,
    x: Any,
    ord: Any = 2,
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
    out: Any = None,
) -> Any:
    if dtype is not None or out is not None:
        return NotImplemented
    return vector_norm(tracer, x, ord, dim, keepdim)


def linalg_norm(
    tracer: fx.Tracer,
    A: Any,
    ord: Any = None,
    dim: Any = None,
    keepdim: bool = False,
    *,
    out: Any = None,
    dtype: Any = None,
) -> Any:
    """`torch.linalg.norm` where it is a vector norm: no ord (2-norm of the flattened or given dims),
    or a numeric ord over one dim or a 1-D input. Matrix norms are not written out."""
    if out is not None or dtype is not None:
        return NotImplemented
    if ord is None:
        return vector_norm(tracer, A, 2, dim, keepdim)
    one_dim = isinstance(dim, int) or (isinstance(dim, (list, tuple)) and len(dim) == 1)
    if one_dim or (dim is None and rank_of(tracer, A) == 1):
        return vector_norm(tracer, A, ord, dim, keepdim)
    return NotImplemented


def normalize(
    tracer: fx.Tracer, input: Any, p: Any = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
) -> Any:
    """`F.normalize`: input / max(||input||_p over dim, eps)."""
    if out is not None or not isinstance(eps, (int, float)):
        return NotImplemented
    denom = vector_norm(tracer, input, p, dim, True)
    if denom is NotImplemented:
        return NotImplemented
    return input / torch.clamp(denom, min=eps)


def pairwise_distance(
    tracer: fx.Tracer, x1: Any, x2: Any, p: Any = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Any:
    """`F.pairwise_distance`: ||x1 - x2 + eps||_p over the last dim."""
    rank = max(rank_of(tracer, x1), rank_of(tracer, x2))
    if rank < 1 or not is_f32(tracer, x1, x2) or not isinstance(eps, (int, float)):
        return NotImplemented
    return vector_norm(tracer, x1 - x2 + eps, p, rank - 1, keepdim)


def triplet_margin_loss(
    tracer: fx.Tracer,
    anchor: Any,
    positive: Any,
    negative: Any,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    """max(margin + d(a, p) - d(a, n), 0), with d(a, n) = min(d(a, n), d(p, n)) when swapping."""
    if _legacy(size_average, reduce) or reduction not in _REDUCTIONS or not isinstance(margin, (int, float)):
        return NotImplemented
    if any(rank_of(tracer, t) != 2 for t in (anchor, positive, negative)):
        return NotImplemented  # PyTorch also takes unbatched 1-D triplets; not written out
    positive_distance = pairwise_distance(tracer, anchor, positive, p, eps)
    negative_distance = pairwise_distance(tracer, anchor, negative, p, eps)
    if positive_distance is NotImplemented or negative_distance is NotImplemented:
        return NotImplemented
    if swap is True:
        negative_distance = torch.minimum(
            negative_distance, pairwise_distance(tracer, positive, negative, p, eps)
        )
    elif swap is not False:
        return NotImplemented
    return _reduce(torch.clamp(margin + positive_distance - negative_distance, min=0.0), reduction)


def _absolute_error(tracer: fx.Tracer, input: Any, target: Any) -> Any:
    return torch.abs(input - target) if is_f32(tracer, input, target) else NotImplemented


def smooth_l1_loss(
    tracer: fx.Tracer,
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Any:
    """z = |x - y|; z < beta ? 0.5 z^2 / beta : z - 0.5 beta, written branch-free with m = min(z, beta):
    0.5 m^2 / beta + (z - m) (exactly PyTorch's value below beta, within an ulp above)."""
    if _legacy(size_average, reduce) or reduction not in _REDUCTIONS or not isinstance(beta, (int, float)):
        return NotImplemented
    z = _absolute_error(tracer, input, target)
    if z is NotImplemented or beta < 0:
        return NotImplemented
    if beta == 0:
        return _reduce(z, reduction)
    m = torch.clamp(z, max=float(beta))
    return _reduce(0.5 * m * m / float(beta) + (z - m), reduction)


def huber_loss(
    tracer: fx.Tracer,
    input: Any,
    target: Any,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Any = None,
) -> Any:
    """z < delta ? 0.5 z^2 : delta (z - 0.5 delta), branch-free: 0.5 m^2 + delta (z - m), m = min(z, delta)."""
    if (
        weight is not None
        or reduction not in _REDUCTIONS
        or not isinstance(delta, (int, float))
        or delta <= 0
    ):
        return NotImplemented
    z = _absolute_error(tracer, input, target)
    if z is NotImplemented:
        return NotImplemented
    m = torch.clamp(z, max=float(delta))
    return _reduce(0.5 * m * m + float(delta) * (z - m), reduction)


def _pointwise_loss(
    tracer: fx.Tracer,
    pointwise: Callable[[Any], Any],
    input: Any,
    target: Any,
    size_average: Any,
    reduce: Any,
    reduction: str,
    weight: Any,
) -> Any:
    """A loss that is `pointwise(input - target)` reduced (MSE: d * d, L1: |d|)."""
    if _legacy(size_average, reduce) or weight is not None or reduction not in _REDUCTIONS:
        return NotImplemented
    if not is_f32(tracer, input, target):
        return NotImplemented
    return _reduce(pointwise(input - target), reduction)


def mse_loss(
    tracer: fx.Tracer,
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Any:
    return _pointwise_loss(tracer, lambda d: d * d, input, target, size_average, reduce, reduction, weight)


def l1_loss(
    tracer: fx.Tracer,
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Any:
    return _pointwise_loss(tracer, torch.abs, input, target, size_average, reduce, reduction, weight)


def kl_div(
    tracer: fx.Tracer,
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Any:
    """Pointwise xlogy(t, t) - t * x (or exp(t) (t - x) for log targets), then the reduction;
    'batchmean' divides the sum by the batch size."""
    if _legacy(size_average, reduce) or reduction not in (*_REDUCTIONS, "batchmean"):
        return NotImplemented
    if not is_f32(tracer, input, target) or not isinstance(log_target, bool):
        return NotImplemented
    if log_target:
        pointwise = torch.exp(target) * (target - input)
    else:
        pointwise = torch.xlogy(target, target) - target * input
    if reduction != "batchmean":
        return _reduce(pointwise, reduction)
    rank = rank_of(tracer, input)
    total = torch.sum(pointwise)
    return total if rank == 0 else total / shape_of(tracer, input)[0]


def cross_entropy(
    tracer: fx.Tracer,
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Any:
    """Class-probability targets (a float32 target shaped like the input): -sum_c t log_softmax(x)
    over the class dim. Class-index targets (int64): logsumexp(x) - x[target] per sample, through
    one pick of the target class and the sample's weight (0 where the target is ignore_index), so
    'mean' divides by the number of samples that count, as PyTorch does."""
    if _legacy(size_average, reduce) or weight is not None or label_smoothing != 0.0:
        return NotImplemented
    rank = rank_of(tracer, input)
    if reduction not in _REDUCTIONS or not is_f32(tracer, input) or rank < 1:
        return NotImplemented
    class_dim = 1 if rank >= 2 else 0
    if dtype_of(tracer, target) == torch.int64 and type(ignore_index) is int:
        expected = shape_of(tracer, input)[:class_dim] + shape_of(tracer, input)[class_dim + 1 :]
        if shape_of(tracer, target) != expected:
            return NotImplemented
        picked: Any = tracer.create_proxy(
            "call_function", _stitch_nll_pick, (input, target, class_dim, ignore_index), {}
        )
        counts = picked[1]
        loss = (torch.logsumexp(input, dim=class_dim) - picked[0]) * counts
        if reduction == "mean":
            return torch.sum(loss) / torch.sum(counts)
        return _reduce(loss, reduction)
    if not is_f32(tracer, target) or shape_of(tracer, input) != shape_of(tracer, target):
        return NotImplemented
    loss = -torch.sum(target * torch.log_softmax(input, dim=class_dim), dim=class_dim)
    return _reduce(loss, reduction)


def _module_call(function: Callable[..., Any], settings: dict[str, str]) -> Callable[..., Any]:
    """A module decomposition: the functional one with the module's own settings
    (`settings` maps the function's parameter names to the module's attribute names)."""

    def decompose(tracer: fx.Tracer, module: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            return NotImplemented
        return function(tracer, *args, **{name: getattr(module, attr) for name, attr in settings.items()})

    return decompose


def _same_names(*names: str) -> dict[str, str]:
    return {name: name for name in names}


def norm_method(
    tracer: fx.Tracer, input: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None
) -> Any:
    """`Tensor.norm` (its fourth positional parameter is dtype, not out)."""
    return norm(tracer, input, p, dim, keepdim, dtype=dtype)


LOSS_FUNCTIONS: dict[Any, Callable[..., Any]] = {
    torch.norm: norm,
    torch.linalg.vector_norm: linalg_vector_norm,
    torch.linalg.norm: linalg_norm,
    F.normalize: normalize,
    F.pairwise_distance: pairwise_distance,
    F.triplet_margin_loss: triplet_margin_loss,
    F.smooth_l1_loss: smooth_l1_loss,
    F.huber_loss: huber_loss,
    F.mse_loss: mse_loss,
    F.l1_loss: l1_loss,
    F.kl_div: kl_div,
    F.cross_entropy: cross_entropy,
}
LOSS_METHODS: dict[str, Callable[..., Any]] = {"norm": norm_method}
LOSS_MODULES: dict[type, Callable[..., Any]] = {
    nn.MSELoss: _module_call(mse_loss, _same_names("reduction")),
    nn.L1Loss: _module_call(l1_loss, _same_names("reduction")),
    nn.SmoothL1Loss: _module_call(smooth_l1_loss, _same_names("reduction", "beta")),
    nn.HuberLoss: _module_call(huber_loss, _same_names("reduction", "delta")),
    nn.KLDivLoss: _module_call(kl_div, _same_names("reduction", "log_target")),
    nn.PairwiseDistance: _module_call(pairwise_distance, {"p": "norm", "eps": "eps", "keepdim": "keepdim"}),
    nn.TripletMarginLoss: _module_call(
        triplet_margin_loss, _same_names("margin", "p", "eps", "swap", "reduction")
    ),
    nn.CrossEntropyLoss: _module_call(
        cross_entropy, _same_names("weight", "ignore_index", "reduction", "label_smoothing")
    ),
}
