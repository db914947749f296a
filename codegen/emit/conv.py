"""Code for a conv group: one cuDNN launcher call, then (when needed) one fused epilogue kernel.

The launcher (templates/conv.cuh) does the convolution and, when the schedule folds them, the
conv's bias, a residual add and a ReLU (schedule/conv.py decides). Every other epilogue op, plus
the bias in that case, runs as one of our elementwise kernels in place over the conv output.
The Python side (`_stitch_conv`, conv_runtime.py) computes the output shape, owns the workspace
and reads PyTorch's cuDNN TF32 setting at each call.
"""

from __future__ import annotations

from typing import Any

from codegen.emit.chain import ChainOp, Token, spec_ops
from codegen.emit.helper import Helper
from codegen.emit.kernels import GroupWriter
from codegen.schedule.conv import conv_bias, conv_folds, conv_pointwise, conv_template
from codegen.schedule.fusion import Group

_SPATIAL = [(f"{name}{i}", "int64_t") for name in ("i", "k", "o", "p", "s", "d") for i in range(3)]
CONV_PARAMS: list[tuple[str, str]] = [
    ("const float*", "x"),
    ("const float*", "w"),
    ("const float*", "bias"),
    ("const float*", "z"),
    ("float*", "y"),
    ("int64_t", "n"),
    ("int64_t", "c"),
    ("int64_t", "k"),
    *[(ctype, name) for name, ctype in _SPATIAL],
    ("int", "nd"),
    ("int", "groups"),
    ("int", "transposed"),
    ("int", "act"),
    ("int", "tf32"),
    ("void*", "ws"),
    ("int64_t", "ws_bytes"),
]


def write_conv(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for a conv group; returns (template, launches)."""
    pointwise = conv_pointwise(writer.classifier, group)  # also timed as a GEMM: the gemm library joins
    depthwise = bool(group.anchor is not None and group.anchor.args.get("depthwise"))  # our kernel joins
    extra = (("gemm",) if pointwise else ()) + (("conv_dw",) if depthwise else ())
    writer.unit.use(*extra, "conv_engine", "conv")
    writer.unit.library_launcher("conv", CONV_PARAMS, group.id, result="int64_t")
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    params = args["params"]
    fold = conv_folds(writer.classifier, group)
    x, w = helper.ref(args["input"]), helper.ref(args["weight"])
    bias = conv_bias(group)
    in_launcher = fold.bias is not None
    launcher_bias = helper.ref(bias) if in_launcher else "None"
    residual = helper.ref(fold.residual) if fold.residual is not None else "None"
    helper.lines.append(
        f"out = _stitch_conv({x}, {w}, {launcher_bias}, {residual}, {params.stride!r}, {params.padding!r}, "
        f"{params.dilation!r}, {params.groups}, {params.transposed}, {params.output_padding!r}, "
        f"{1 if fold.relu else 0})"
    )
    key: Any = group.epilogue[fold.count - 1].node if fold.count else anchor.node
    chain_ops: list[ChainOp] = []
    if bias is not None and not in_launcher:  # the epilogue kernel adds the bias first
        raw = Token("raw", full=True)
        helper.locals[raw] = "out"
        chain_ops.append(helper.conv_bias_op(anchor, raw))
        key = raw
    chain_ops += spec_ops(group.epilogue[fold.count :])
    launches = writer.library_epilogue(helper, group, key, chain_ops)
    return conv_template(writer.classifier, group), launches
