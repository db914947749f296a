"""Variance, standard deviation, binary cross entropy and lerp written out while the tracer records.

Why: like the norms and losses (decompose_losses.py), each is one opaque call left to PyTorch, yet
only a short chain of elementwise math around a reduction or two, which the fusion planner turns
into our kernels. The formulas follow PyTorch's:
- var / std: two passes, the mean, then the sum of squared deviations divided by N - correction
  (PyTorch uses Welford's single pass; both are exact to a few ulps in fp32 at these sizes);
- binary cross entropy: each log clamped at -100, as ATen does, with log1p(-p) for log(1 - p);
- with logits: (1 - t) x + max(-x, 0) + log1p(exp(-|x|)), which is (1 - t) x - log_sigmoid(x);
  with pos_weight the last two terms are scaled by (pos_weight - 1) t + 1;
- lerp with a number as weight: ATen's two branches, picked while tracing (weight < 0.5: start
  + w (end - start), else end - (end - start) (1 - w)).
Variants not written out (a tensor weight for lerp, the legacy size_average/reduce arguments, a
weight made outside the trace, a correction that leaves N - correction <= 0) return NotImplemented and stay
one PyTorch call, listed as uncovered.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from codegen.frontend.decompose_losses import _REDUCTIONS, _dims, _legacy, _module_call, _reduce, _same_names
from codegen.frontend.trace_values import is_f32, rank_of, shape_of


def _variance(tracer: fx.Tracer, input: Any, dim: Any, unbiased: Any, keepdim: Any, correction: Any) -> Any:
    """The variance over `dim` (all dims when None); `unbiased` may come positionally in `dim`'s
    place (`x.var(True)`), as PyTorch's overloads allow."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if correction is None:
        correction = 0 if unbiased is False else 1
    if not is_f32(tracer, input) or rank_of(tracer, input) < 1 or not isinstance(keepdim, bool):
        return NotImplemented
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        return NotImplemented
    dims = _dims(tracer, input, dim)
    if not dims or len(set(dims)) != len(dims):  # None: not constant; (): PyTorch reads it as all dims
        return NotImplemented
    shape = shape_of(tracer, input)
    count = math.prod(shape[d] for d in dims)
    if count - correction <= 0:
        return NotImplemented
    deviation = input - torch.mean(input, dims, keepdim=True)
    return torch.sum(deviation * deviation, dims, keepdim=keepdim) / float(count - correction)


def var(
    tracer: fx.Tracer,
    input: Any,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: Any = False,
    *,
    correction: Any = None,
) -> Any:
    """`torch.var` / `x.var`."""
    return _variance(tracer, input, dim, unbiased, keepdim, correction)


def std(
    tracer: fx.Tracer,
    input: Any,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: Any = False,
    *,
    correction: Any = None,
) -> Any:
    """`torch.std` / `x.std`: the square root of the variance."""
    variance = _variance(tracer, input, dim, unbiased, keepdim, correction)
    return variance if variance is NotImplemented else torch.sqrt(variance)


def _traced_f32(tracer: fx.Tracer, value: Any) -> bool:
    """A float32 tensor of the trace: an input, a module's buffer (read through get_attr) or a value
    computed from them; a tensor made outside the trace (a constant) is not written out."""
    return isinstance(value, fx.Proxy) and is_f32(tracer, value)


def _weighted(tracer: fx.Tracer, loss: Any, weight: Any) -> Any:
    """loss * weight (loss alone without a weight); NotImplemented for a weight that is not traced."""
    if weight is None:
        return loss
    return loss * weight if _traced_f32(tracer, weight) else NotImplemented


def binary_cross_entropy(
    tracer: fx.Tracer,
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    """-(t log p + (1 - t) log(1 - p)), each log clamped at -100."""
    if _legacy(size_average, reduce) or reduction not in _REDUCTIONS or not is_f32(tracer, input, target):
        return NotImplemented
    if shape_of(tracer, input) != shape_of(tracer, target):
        return NotImplemented
    log_p = torch.clamp(torch.log(input), min=-100.0)
    log_q = torch.clamp(torch.log1p(-input), min=-100.0)
    loss = _weighted(tracer, (target - 1.0) * log_q - target * log_p, weight)
    return loss if loss is NotImplemented else _reduce(loss, reduction)


def binary_cross_entropy_with_logits(
    tracer: fx.Tracer,
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Any:
    """(1 - t) x + s (max(-x, 0) + log1p(exp(-|x|))), s = (pos_weight - 1) t + 1 or 1."""
    if _legacy(size_average, reduce) or reduction not in _REDUCTIONS or not is_f32(tracer, input, target):
        return NotImplemented
    if shape_of(tracer, input) != shape_of(tracer, target):
        return NotImplemented
    softplus_neg = torch.clamp(-input, min=0.0) + torch.log1p(torch.exp(-torch.abs(input)))
    if pos_weight is not None:
        if not _traced_f32(tracer, pos_weight):
            return NotImplemented
        softplus_neg = softplus_neg * ((pos_weight - 1.0) * target + 1.0)
    loss = _weighted(tracer, (1.0 - target) * input + softplus_neg, weight)
    return loss if loss is NotImplemented else _reduce(loss, reduction)


def lerp(tracer: fx.Tracer, input: Any, end: Any, weight: Any) -> Any:
    """`torch.lerp` / `x.lerp` with a number as weight."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not is_f32(tracer, input, end):
        return NotImplemented
    w = float(weight)
    if abs(w) < 0.5:
        return input + w * (end - input)
    return end - (end - input) * (1.0 - w)


STATS_FUNCTIONS: dict[Any, Callable[..., Any]] = {
    torch.var: var,
    torch.std: std,
    F.binary_cross_entropy: binary_cross_entropy,
    F.binary_cross_entropy_with_logits: binary_cross_entropy_with_logits,
    torch.lerp: lerp,
}
STATS_METHODS: dict[str, Callable[..., Any]] = {"var": var, "std": std, "lerp": lerp}
STATS_MODULES: dict[type, Callable[..., Any]] = {
    # the modules' weight / pos_weight buffers are traced (get_attr) like any other buffer
    nn.BCELoss: _module_call(binary_cross_entropy, _same_names("weight", "reduction")),
    nn.BCEWithLogitsLoss: _module_call(
        binary_cross_entropy_with_logits, _same_names("weight", "pos_weight", "reduction")
    ),
}
