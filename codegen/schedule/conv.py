"""How a convolution group is split between the cuDNN call and our epilogue kernel.

A conv group is the convolution plus the elementwise ops after it. The C++ launcher can apply
the conv's bias, one residual add of a full-size tensor and a ReLU itself (cuDNN's fused
conv-bias-activation call, or its own small kernel: the algorithm search times both). Anything
else becomes one fused elementwise kernel over the conv output, and then the bias goes into that
kernel too, so the output is read and written once after the convolution either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from codegen.frontend.ops import CONV, ELEMENTWISE, Classifier, OpSpec

if TYPE_CHECKING:
    from codegen.schedule.fusion import Group


@dataclass
class ConvFold:
    """What the conv launcher applies itself; `rest` is what the epilogue kernel does."""

    bias: Any = None
    residual: Any = None
    relu: bool = False
    count: int = 0  # leading epilogue ops folded into the launcher
    rest: int = 0  # epilogue ops left to our elementwise kernel

    @property
    def in_launcher(self) -> bool:
        return self.bias is not None or self.residual is not None or self.relu


def _anchor(group: Group) -> OpSpec:
    assert group.anchor is not None and group.anchor.family == CONV
    return group.anchor


def _full_tensor(classifier: Classifier, ref: Any, shape: tuple[int, ...]) -> bool:
    value = classifier.value(ref)
    return isinstance(value, torch.Tensor) and value.dtype == torch.float32 and tuple(value.shape) == shape


def conv_bias(group: Group) -> Any:
    """The bias this group adds: none when its reader's prologue adds it (fusion.Group.bias_moved)."""
    return None if group.bias_moved else _anchor(group).args.get("bias")


def conv_pointwise(classifier: Classifier, group: Group) -> bool:
    """A forward convolution with 1-wide kernels, stride 1, no padding and one group: a GEMM per batch
    item, which the launcher also times as one batched cuBLASLt call (templates/conv.cuh)."""
    anchor = _anchor(group)
    params = anchor.args["params"]
    weight = classifier.value(anchor.args["weight"])
    return (
        not params.transposed
        and params.groups == 1
        and isinstance(weight, torch.Tensor)
        and all(extent == 1 for extent in weight.shape[2:])
        and all(step == 1 for step in params.stride)
        and all(pad == 0 for pad in params.padding)
    )


def conv_folds(classifier: Classifier, group: Group) -> ConvFold:
    """The launcher's share of a conv group at its demotion level (level 1: nothing folded)."""
    anchor = _anchor(group)
    bias = conv_bias(group)
    fold = ConvFold(bias=bias)
    if group.level > 0:
        return ConvFold(rest=len(group.epilogue))
    out_shape = tuple(classifier.value(anchor.node).shape)
    tail: fx.Node = anchor.node
    for spec in group.epilogue:
        if len(tail.users) != 1 or spec.family != ELEMENTWISE:
            break
        operands = spec.args["operands"]
        others = [o for o in operands if o is not tail]
        if spec.op == "relu" and operands == [tail] and not fold.relu:
            fold.relu = True
        elif (
            spec.op == "add"
            and not fold.relu
            and fold.residual is None
            and len(operands) == 2
            and len(others) == 1
            and spec.args["params"].get("alpha", 1) == 1
            and _full_tensor(classifier, others[0], out_shape)
        ):
            fold.residual = others[0]
        else:
            break
        fold.count += 1
        tail = spec.node
    fold.rest = len(group.epilogue) - fold.count
    if fold.rest:  # one elementwise pass follows anyway: it applies the bias and every op
        return ConvFold(rest=len(group.epilogue))
    return fold


def conv_template(classifier: Classifier, group: Group) -> str:
    fold = conv_folds(classifier, group)
    anchor = _anchor(group)
    name = "cudnn_conv_transpose" if anchor.args["params"].transposed else "cudnn_conv"
    if fold.in_launcher:
        name += "+bias_act"
    if fold.rest or (group.level > 0 and conv_bias(group) is not None):
        name += "+ew_epilogue"
    return name


def conv_launches(classifier: Classifier, group: Group) -> int:
    """cuDNN call plus our epilogue kernel (the launcher's own bias/act pass counted as one)."""
    fold = conv_folds(classifier, group)
    separate = fold.rest > 0 or (group.level > 0 and conv_bias(group) is not None)
    return 1 + (1 if separate or fold.in_launcher else 0)


def conv_has_split_form(classifier: Classifier, group: Group) -> bool:
    """Level 1 moves what the launcher folds into a separate epilogue kernel; nothing else changes."""
    return conv_folds(classifier, group).in_launcher


def conv_describe(classifier: Classifier, group: Group, where: str) -> tuple[str, str]:
    """(subtask title, detail) for a conv group."""
    anchor = _anchor(group)
    params = anchor.args["params"]
    fold = conv_folds(classifier, group)
    call = "cudnnConvolutionBackwardData" if params.transposed else "cudnnConvolutionForward"
    detail = (
        f"cuDNN {call} from our C++{where} (stride {params.stride}, padding {params.padding}, dilation "
        f"{params.dilation}, groups {params.groups}); algorithm searched once per shape, GPU and math mode "
        "(timed, accuracy-gated, cached in process and on disk); FMA math unless PyTorch allows TF32 for cuDNN"
    )
    if fold.in_launcher:
        parts = [n for n, on in (("bias", fold.bias), ("residual", fold.residual), ("relu", fold.relu)) if on]
        detail += f"; {'+'.join(parts)} in the launcher (cudnnConvolutionBiasActivationForward or our kernel)"
    epilogue = [s.op for s in group.epilogue[fold.count :]]
    if fold.rest or (group.level > 0 and conv_bias(group) is not None):
        with_bias = ["bias"] if conv_bias(group) is not None else []
        detail += f"; one fused elementwise epilogue kernel for {with_bias + epilogue}"
    if group.bias_moved:
        detail += "; its bias is added by the reader's prologue"
    return f"{anchor.op} + epilogue {[s.op for s in group.epilogue]}", detail
