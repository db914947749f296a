"""Classify group norm and instance norm into one canonical record (groups, affine refs, eps).

Why one family: instance norm is group norm with one channel per group, and both normalise each
(sample, group) slab of a contiguous NC* tensor with its own statistics, then apply a per-channel
affine. `nn.GroupNorm`, `F.group_norm`, `nn.InstanceNorm1d/2d/3d` and `F.instance_norm` (input
statistics) all become `{"input", "groups", "weight", "bias", "eps"}`; `groups=None` means one
group per channel. Running statistics of an instance norm (track_running_stats=True) stay PyTorch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

NORM = "group_norm"  # the family of per-(sample, group) normalisations
NORM_OPS = frozenset({"group_norm", "instance_norm"})
NORM_FUNCTIONS: list[tuple[str, list[Any]]] = [
    ("group_norm", [F.group_norm, getattr(torch, "group_norm", None)]),
    ("instance_norm", [F.instance_norm]),  # torch.instance_norm orders its arguments differently
]
NORM_MODULES: list[tuple[type, str]] = [
    (nn.GroupNorm, "group_norm"),
    (nn.InstanceNorm1d, "instance_norm"),
    (nn.InstanceNorm2d, "instance_norm"),
    (nn.InstanceNorm3d, "instance_norm"),
]
_SIGNATURES = {
    "group_norm": ("input", "num_groups", "weight", "bias", "eps"),
    "instance_norm": (
        "input",
        "running_mean",
        "running_var",
        "weight",
        "bias",
        "use_input_stats",
        "momentum",
        "eps",
    ),
}


def _module_arguments(classifier: Classifier, spec: OpSpec) -> dict[str, Any]:
    module: Any = classifier.root.get_submodule(str(spec.node.target))
    x = spec.node.args[0] if spec.node.args else spec.node.kwargs.get("input")
    weight = classifier.module_attr(spec, "weight") if getattr(module, "weight", None) is not None else None
    bias = classifier.module_attr(spec, "bias") if getattr(module, "bias", None) is not None else None
    args = {"input": x, "weight": weight, "bias": bias, "eps": float(module.eps)}
    if isinstance(module, nn.GroupNorm):
        args["groups"] = int(module.num_groups)
        return args
    if module.track_running_stats:
        raise ValueError("instance norm with running statistics (track_running_stats=True)")
    args["groups"] = None
    return args


def _function_arguments(spec: OpSpec) -> dict[str, Any]:
    names = _SIGNATURES[spec.op]
    if len(spec.node.args) > len(names):
        raise ValueError("unexpected extra arguments")
    bound = dict(zip(names, spec.node.args, strict=False))
    bound.update(spec.node.kwargs)
    args = {k: bound.get(k) for k in ("input", "weight", "bias")}
    args["eps"] = bound.get("eps", 1e-5)
    if spec.op == "group_norm":
        args["groups"] = bound.get("num_groups")
        if not isinstance(args["groups"], int) or isinstance(args["groups"], bool) or args["groups"] < 1:
            raise ValueError("num_groups is not a positive constant int")
        return args
    if bound.get("use_input_stats", True) is not True:
        raise ValueError("instance norm with running statistics (use_input_stats=False)")
    if bound.get("running_mean") is not None or bound.get("running_var") is not None:
        raise ValueError("instance norm updating running statistics")
    args["groups"] = None
    return args


def classify_norm(classifier: Classifier, spec: OpSpec) -> None:
    """Fill `spec` (family NORM, args) or reject it with the reason it stays PyTorch."""
    try:
        args = (
            _module_arguments(classifier, spec)
            if spec.node.op == "call_module"
            else _function_arguments(spec)
        )
    except ValueError as exc:
        classifier.reject(spec, f"{spec.op}: {exc}")
        return
    value, out = classifier.value(args["input"]), classifier.value(spec.node)
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in (value, out)):
        classifier.reject(spec, f"{spec.op}: input or output is not a float32 tensor")
        return
    if value.dim() < (2 if spec.op == "group_norm" else 3):
        classifier.reject(spec, f"{spec.op}: needs a batched (N, C, ...) input")
        return
    channels = int(value.shape[1])
    groups = args["groups"]
    if groups is not None and channels % groups:
        classifier.reject(spec, f"{spec.op}: {channels} channels do not split into {groups} groups")
        return
    if not isinstance(args["eps"], (int, float)) or isinstance(args["eps"], bool):
        classifier.reject(spec, f"{spec.op}: non-constant eps")
        return
    for key in ("weight", "bias"):
        ref = args[key]
        if ref is not None and not (
            classifier.is_f32(ref) and tuple(classifier.value(ref).shape) == (channels,)
        ):
            classifier.reject(spec, f"{spec.op}: {key} is not a float32 tensor of {channels} channels")
            return
    args["eps"] = float(args["eps"])
    spec.family = NORM
    spec.args = args


def norm_flops(classifier: Classifier, spec: OpSpec) -> int:
    """Statistics (2 per element) plus the affine normalisation (2-4 per element), as for batch norm."""
    out = classifier.value(spec.node)
    return 7 * int(out.numel())
