"""Classify pooling (max, average, adaptive average, adaptive max; 1-3-D) into one `PoolParams`.

Why a module of its own: `nn.MaxPool2d`, `F.max_pool2d`, `torch.max_pool2d`, `nn.AvgPool3d(...,
divisor_override=...)`, `nn.AdaptiveAvgPool1d` and the rest all become one record, so the schedule
and our pooling kernel see one operator. A global adaptive pool (every output size 1) is a plain
mean / max over the spatial dims: it becomes a REDUCTION, whose row kernel also fuses a prologue.
What the kernel does not produce stays PyTorch with a reason: returned indices, non-float32 tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from codegen.frontend.families import REDUCTION

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

POOL = "pool"  # the family of windowed pooling kernels
_KINDS = ("max", "avg", "adaptive_avg", "adaptive_max")
POOL_OPS = frozenset(f"{kind}_pool{nd}d" for kind in _KINDS for nd in (1, 2, 3))
POOL_FUNCTIONS: list[tuple[str, list[Any]]] = [
    (f"{kind}_pool{nd}d", [getattr(F, f"{kind}_pool{nd}d"), getattr(torch, f"{kind}_pool{nd}d", None)])
    for kind in _KINDS
    for nd in (1, 2, 3)
]
POOL_MODULES: list[tuple[type, str]] = [
    (getattr(nn, f"{cls}Pool{nd}d"), f"{kind}_pool{nd}d")
    for cls, kind in (
        ("Max", "max"),
        ("Avg", "avg"),
        ("AdaptiveAvg", "adaptive_avg"),
        ("AdaptiveMax", "adaptive_max"),
    )
    for nd in (1, 2, 3)
]
# Positional signatures after `input` (PyTorch's orders).
_SIGNATURES = {
    "max": ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "avg": (
        "input",
        "kernel_size",
        "stride",
        "padding",
        "ceil_mode",
        "count_include_pad",
        "divisor_override",
    ),
    "adaptive_avg": ("input", "output_size"),
    "adaptive_max": ("input", "output_size", "return_indices"),
}
_MODULE_FIELDS = {
    "max": ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "avg": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
    "adaptive_avg": ("output_size",),
    "adaptive_max": ("output_size", "return_indices"),
}


@dataclass(frozen=True)
class PoolParams:
    """One pooling operator; spatial tuples have one entry per pooled dim (outermost first)."""

    kind: str  # 'max', 'avg', 'adaptive_avg' or 'adaptive_max'
    nd: int
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor: int = 0  # avg pool's divisor_override (0: none)
    output_size: tuple[int | None, ...] = ()  # adaptive pools; None keeps the input's size

    @property
    def adaptive(self) -> bool:
        return self.kind.startswith("adaptive")


def pool_kind(op: str) -> tuple[str, int]:
    """'adaptive_avg_pool2d' -> ('adaptive_avg', 2)."""
    kind, _, rest = op.rpartition("_pool")
    return kind, int(rest[0])


def _ints(value: Any, nd: int, name: str, allow_none: bool = False) -> tuple[Any, ...]:
    """An int or a sequence of nd ints (None entries where allowed); ValueError for anything else."""

    def ok(v: Any) -> bool:
        return (isinstance(v, int) and not isinstance(v, bool)) or (allow_none and v is None)

    if ok(value) and value is not None:
        return (int(value),) * nd
    if isinstance(value, (tuple, list)) and all(ok(v) for v in value):
        if len(value) == 1 and nd > 1 and value[0] is not None:
            return (int(value[0]),) * nd
        if len(value) == nd:
            return tuple(value)
    raise ValueError(f"{name}={value!r} is not {nd} constant int(s)")


def pool_params(op: str, raw: dict[str, Any]) -> PoolParams:
    """Normalise the raw arguments of `op`; ValueError (one line) for what our kernel does not cover."""
    kind, nd = pool_kind(op)
    if raw.get("return_indices"):
        raise ValueError("return_indices=True (the indices are not generated)")
    if kind.startswith("adaptive"):
        sizes = _ints(raw.get("output_size"), nd, "output_size", allow_none=True)
        if any(s is not None and s < 1 for s in sizes):
            raise ValueError("output_size must be >= 1")
        return PoolParams(kind, nd, output_size=sizes)
    kernel = _ints(raw.get("kernel_size"), nd, "kernel_size")
    stride_raw = raw.get("stride")
    stride = (
        kernel
        if stride_raw is None or stride_raw == [] or stride_raw == ()
        else _ints(stride_raw, nd, "stride")
    )
    padding = _ints(raw.get("padding", 0), nd, "padding")
    dilation = _ints(raw.get("dilation", 1), nd, "dilation") if kind == "max" else (1,) * nd
    flags = {
        name: raw.get(name, default) for name, default in (("ceil_mode", False), ("count_include_pad", True))
    }
    if not all(isinstance(v, bool) for v in flags.values()):
        raise ValueError("ceil_mode / count_include_pad are not constant bools")
    divisor = raw.get("divisor_override")
    if divisor is not None and (not isinstance(divisor, int) or isinstance(divisor, bool) or divisor < 1):
        raise ValueError(f"divisor_override={divisor!r} is not a positive constant int")
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise ValueError("kernel/stride/dilation must be >= 1 and padding >= 0")
    if any(2 * p > k for p, k in zip(padding, kernel, strict=True)):
        raise ValueError("padding larger than half the kernel")
    return PoolParams(
        kind,
        nd,
        kernel,
        stride,
        padding,
        dilation,
        flags["ceil_mode"],
        flags["count_include_pad"],
        divisor or 0,
    )


def _raw_arguments(classifier: Classifier, spec: OpSpec, kind: str) -> tuple[Any, dict[str, Any]]:
    node = spec.node
    if node.op == "call_module":
        module = classifier.root.get_submodule(str(node.target))
        x = node.args[0] if node.args else node.kwargs.get("input")
        return x, {name: getattr(module, name, None) for name in _MODULE_FIELDS[kind]}
    names = _SIGNATURES[kind]
    bound = dict(zip(names, node.args, strict=False))
    if len(node.args) > len(names):
        raise ValueError("unexpected extra arguments")
    bound.update(node.kwargs)
    unknown = set(bound) - set(names)
    if unknown:
        raise ValueError(f"unexpected arguments {sorted(unknown)}")
    return bound.pop("input", None), bound


def classify_pool(classifier: Classifier, spec: OpSpec) -> None:
    """Fill `spec` (family POOL, or REDUCTION for a global adaptive pool) or reject it with a reason."""
    kind, nd = pool_kind(spec.op)
    try:
        x, raw = _raw_arguments(classifier, spec, kind)
        params = pool_params(spec.op, raw)
    except ValueError as exc:
        classifier.reject(spec, f"{spec.op}: {exc}")
        return
    value, out = classifier.value(x), classifier.value(spec.node)
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in (value, out)):
        classifier.reject(spec, f"{spec.op}: input or output is not a float32 tensor")
        return
    if value.dim() not in (nd + 1, nd + 2):
        classifier.reject(spec, f"{spec.op}: needs a {nd + 1}-D or {nd + 2}-D input")
        return
    spatial = list(range(value.dim() - nd, value.dim()))
    if params.adaptive and all(int(s) == 1 for s in out.shape[-nd:]):
        spec.op = "mean" if kind == "adaptive_avg" else "amax"
        spec.family = REDUCTION
        spec.reason = f"global {kind}_pool{nd}d as a reduction over dims {spatial}"
        spec.args = {"input": x, "dims": spatial, "keepdim": True, "with_indices": False}
        return
    spec.family = POOL
    spec.args = {"input": x, "params": params}


def pool_out_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """PyTorch's output length of a max / avg pool (ceil mode never starts a window in the right padding)."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def pool_flops(classifier: Classifier, spec: OpSpec) -> int:
    """One comparison or add per window element read (adaptive windows: input volume / output volume)."""
    params: PoolParams = spec.args["params"]
    out = classifier.value(spec.node)
    if params.adaptive:
        x = classifier.value(spec.args["input"])
        window = math.prod(int(s) for s in x.shape[-params.nd :]) / max(
            1, math.prod(int(s) for s in out.shape[-params.nd :])
        )
        return int(out.numel() * max(1.0, window))
    return int(out.numel()) * math.prod(params.kernel)
