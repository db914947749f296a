"""Classify convolutions (1-3-D, grouped, dilated, strided, transposed) into one canonical record.

Why a module of its own: `nn.Conv2d`, `F.conv2d(x, w, b, ...)`, `nn.ConvTranspose3d` and their
padding spellings ('same', 'valid', ints, tuples) all become the same `ConvParams`, so the
schedule and the cuDNN emitter see one operator. What cuDNN's convolution API cannot express
stays PyTorch with a reason: non-zero padding modes, asymmetric 'same' padding, an explicit
`output_size`, non-float32 tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

CONV = "conv"  # the family of convolutions of every kind
CONV_OPS = frozenset(
    {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
)
CONV_FUNCTIONS: list[tuple[str, list[Any]]] = [
    ("conv1d", [F.conv1d]),
    ("conv2d", [F.conv2d]),
    ("conv3d", [F.conv3d]),
    ("conv_transpose1d", [F.conv_transpose1d]),
    ("conv_transpose2d", [F.conv_transpose2d]),
    ("conv_transpose3d", [F.conv_transpose3d]),
]
CONV_MODULES: list[tuple[type, str]] = [
    (nn.Conv1d, "conv1d"),
    (nn.Conv2d, "conv2d"),
    (nn.Conv3d, "conv3d"),
    (nn.ConvTranspose1d, "conv_transpose1d"),
    (nn.ConvTranspose2d, "conv_transpose2d"),
    (nn.ConvTranspose3d, "conv_transpose3d"),
]
# Positional signatures after `input` (PyTorch's order: transposed convs put groups before dilation).
_SIGNATURES = {
    False: ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    True: ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
}


@dataclass(frozen=True)
class ConvParams:
    """The hyper-parameters of one convolution, one entry per spatial dim."""

    nd: int
    transposed: bool
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    output_padding: tuple[int, ...]
    groups: int


def spatial_dims(op: str) -> int:
    return int(op[-2])


def is_transposed(op: str) -> bool:
    return op.startswith("conv_transpose")


def _tuple(value: Any, nd: int, name: str) -> tuple[int, ...]:
    """An int or a sequence of ints as one int per spatial dim; ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"{name} is a bool")
    if isinstance(value, int):
        return (value,) * nd
    if isinstance(value, (tuple, list)) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        if len(value) == 1:
            return (int(value[0]),) * nd
        if len(value) == nd:
            return tuple(int(v) for v in value)
    raise ValueError(f"{name}={value!r} is not {nd} constant int(s)")


def resolve_padding(padding: Any, kernel: tuple[int, ...], dilation: tuple[int, ...]) -> tuple[int, ...]:
    """Symmetric per-dim padding; 'same' only when it is symmetric (cuDNN pads both sides equally)."""
    if padding == "valid":
        return (0,) * len(kernel)
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        if any(t % 2 for t in totals):
            raise ValueError("padding='same' with an even effective kernel pads one side more")
        return tuple(t // 2 for t in totals)
    return _tuple(padding, len(kernel), "padding")


def conv_params(op: str, raw: dict[str, Any], kernel: tuple[int, ...]) -> ConvParams:
    """Normalise the raw hyper-parameters of `op`; ValueError (one line) when cuDNN cannot run them."""
    nd, transposed = spatial_dims(op), is_transposed(op)
    stride = _tuple(raw.get("stride", 1), nd, "stride")
    dilation = _tuple(raw.get("dilation", 1), nd, "dilation")
    padding = raw.get("padding", 0)
    if transposed and isinstance(padding, str):
        raise ValueError("a transposed convolution with a string padding")
    pad = resolve_padding(padding, kernel, dilation)
    output_padding = _tuple(raw.get("output_padding", 0), nd, "output_padding") if transposed else (0,) * nd
    groups = raw.get("groups", 1)
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"groups={groups!r} is not a positive constant int")
    if min(stride) < 1 or min(dilation) < 1 or min(pad) < 0 or min(output_padding) < 0:
        raise ValueError("stride/dilation must be >= 1 and padding >= 0")
    # PyTorch allows output_padding < max(stride, dilation); cuDNN's backward-data view of the problem
    # needs it below the stride (its forward output of our output must be the input again).
    if any(op_ >= s for op_, s in zip(output_padding, stride, strict=True)):
        raise ValueError("output_padding not smaller than the stride")
    return ConvParams(nd, transposed, stride, pad, dilation, output_padding, groups)


def _bind(node: Any, transposed: bool) -> dict[str, Any]:
    names = _SIGNATURES[transposed]
    bound = dict(zip(names, node.args, strict=False))
    if len(node.args) > len(names):
        bound["extra"] = node.args[len(names) :]
    bound.update(node.kwargs)
    return bound


def classify_conv(classifier: Classifier, spec: OpSpec) -> None:
    """Fill `spec` (family CONV, args) or reject it with the reason it stays PyTorch."""

    def reject(reason: str) -> None:
        classifier.reject(spec, f"{spec.op}: {reason}")

    node, op = spec.node, spec.op
    transposed = is_transposed(op)
    if node.op == "call_module":
        module = classifier.root.get_submodule(str(node.target))
        if len(node.args) + len(node.kwargs) != 1:
            reject("called with an output_size")
            return
        if module.padding_mode != "zeros":
            reject(f"padding_mode={module.padding_mode!r} (only zero padding is generated)")
            return
        x = node.args[0] if node.args else node.kwargs.get("input")
        weight: Any = classifier.module_attr(spec, "weight")
        bias: Any = classifier.module_attr(spec, "bias") if module.bias is not None else None
        raw = {
            "stride": module.stride,
            "padding": module.padding,
            "dilation": module.dilation,
            "groups": module.groups,
            "output_padding": getattr(module, "output_padding", 0),
        }
    else:
        bound = _bind(node, transposed)
        if "extra" in bound:
            reject("unexpected extra arguments")
            return
        x, weight, bias = bound.get("input"), bound.get("weight"), bound.get("bias")
        raw = {k: v for k, v in bound.items() if k not in ("input", "weight", "bias")}
    x_value, w_value, out = classifier.value(x), classifier.value(weight), classifier.value(node)
    nd = spatial_dims(op)
    tensors = (x_value, w_value, out)
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in tensors):
        reject("input, weight or output is not a float32 tensor")
        return
    if x_value.dim() != nd + 2 or w_value.dim() != nd + 2:
        reject(f"needs a batched {nd + 2}-D input (unbatched inputs stay PyTorch)")
        return
    if bias is not None and not (classifier.is_f32(bias) and classifier.value(bias).dim() == 1):
        reject("bias is not a 1-D float32 tensor")
        return
    try:
        params = conv_params(op, raw, tuple(int(s) for s in w_value.shape[2:]))
    except ValueError as exc:
        reject(str(exc))
        return
    spec.family = CONV
    spec.args = {"input": x, "weight": weight, "bias": bias, "params": params}
    spec.args["depthwise"] = eager_fp32_depthwise(params, tuple(int(s) for s in w_value.shape))


def eager_fp32_depthwise(params: ConvParams, weight_shape: tuple[int, ...]) -> bool:
    """Whether PyTorch runs this convolution with its own fp32 depthwise kernel, never cuDNN's TF32: a
    forward 1-D/2-D convolution with one input channel per group (groups > 1). Our depthwise kernel
    (templates/conv_dw.cuh) sums in that kernel's order, so it reproduces eager with TF32 on or off."""
    return not params.transposed and params.nd <= 2 and params.groups > 1 and weight_shape[1] == 1


def conv_flops(classifier: Classifier, spec: OpSpec) -> int:
    """2 x multiply-adds (+ the bias adds): each output of a forward conv, each input of a transposed one,
    meets (channels / groups) x kernel volume weights."""
    params: ConvParams = spec.args["params"]
    weight = classifier.value(spec.args["weight"])
    per_point = math.prod(int(s) for s in weight.shape[1:])
    out = classifier.value(spec.node)
    x = classifier.value(spec.args["input"])
    # Transposed: weight (Cin, Cout/groups, k...), every input element meets Cout/groups x kernel weights.
    points = int(x.numel()) if params.transposed else int(out.numel())
    return 2 * points * per_point + (int(out.numel()) if spec.args.get("bias") is not None else 0)
