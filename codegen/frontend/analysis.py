"""Operator records (OpInfo) with FLOPs and minimum bytes, for the plan and the roofline.

FLOPs count multiply-adds as two; elementwise ops count one per output element (the roofline of such
ops is the memory side anyway). Bytes are the op's tensor inputs read once plus its output written
once, at 4 bytes per float32 element.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.fx as fx

from codegen.frontend.attention_ops import ATTENTION, attention_flops
from codegen.frontend.axis_ops import AXIS, axis_flops
from codegen.frontend.conv_ops import conv_flops
from codegen.frontend.ops import (
    ATTR,
    BATCH_NORM,
    CONV,
    GEMM,
    INPUT,
    LAYER_NORM,
    OUTPUT,
    REDUCTION,
    SCALAR,
    SOFTMAX,
    VIEW,
    Classifier,
    ModuleAttr,
    OpSpec,
)
from codegen.frontend.pool_ops import pool_flops
from codegen.frontend.rnn_ops import RNN, rnn_flops
from graph.artifacts import OpInfo, TensorSpec

# Cost per output element of elementwise ops whose math is more than one instruction.
_ELEMENTWISE_FLOPS = {"gelu": 8, "silu": 5, "sigmoid": 4, "tanh": 5, "softplus": 5, "mish": 9, "elu": 4}


def tensor_spec(value: Any) -> TensorSpec | None:
    if isinstance(value, torch.Tensor):
        return TensorSpec(shape=[int(s) for s in value.shape], dtype=str(value.dtype).replace("torch.", ""))
    return None


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return int(value.numel()) * value.element_size()
    return 0


def _tensor_inputs(classifier: Classifier, spec: OpSpec) -> list[Any]:
    """Tensor values the op reads: node arguments plus module parameters it owns."""
    values: list[Any] = []
    seen: set[int] = set()

    def add(value: Any) -> None:
        if isinstance(value, torch.Tensor) and id(value) not in seen:
            seen.add(id(value))
            values.append(value)

    node = spec.node
    flat: list[fx.Node] = []

    def collect(arg: fx.Node) -> fx.Node:
        flat.append(arg)
        return arg

    fx.node.map_arg((node.args, node.kwargs), collect)
    for arg in flat:
        add(classifier.value(arg))
    for key in ("weight", "bias", "b"):
        ref = spec.args.get(key)
        if isinstance(ref, ModuleAttr):
            add(classifier.value(ref))
    if node.op == "call_module":
        module = classifier.root.get_submodule(str(node.target))
        for param in module.parameters(recurse=False):
            add(param)
    return values


def op_flops(classifier: Classifier, spec: OpSpec) -> int:
    """FLOPs of one operator from its traced shapes."""
    out = classifier.value(spec.node)
    numel = int(out.numel()) if isinstance(out, torch.Tensor) else 0
    op = spec.op
    if spec.family == GEMM:
        a = classifier.value(spec.args["a"])
        k = int(a.shape[-1])
        flops = 2 * numel * k
        if spec.args.get("bias") is not None:
            flops += numel
        return flops
    if spec.family == CONV:
        return conv_flops(classifier, spec)
    if spec.family == "pool":
        return pool_flops(classifier, spec)
    if spec.family == RNN:
        return rnn_flops(spec)
    if spec.family == ATTENTION:
        return attention_flops(spec)
    if spec.family == AXIS:
        return axis_flops(classifier, spec)
    if op in ("conv1d", "conv2d", "conv3d") and spec.node.op == "call_module":
        module = classifier.root.get_submodule(str(spec.node.target))
        weight = cast(torch.Tensor, module.weight)  # a convolution module's weight is a tensor
        per_output = math.prod(weight.shape[1:])  # (Cin / groups) * kernel volume
        return 2 * numel * int(per_output) + (numel if module.bias is not None else 0)
    if spec.family == SOFTMAX:
        return 5 * numel
    if spec.family == LAYER_NORM:
        return 8 * numel
    if spec.family == BATCH_NORM:
        return 7 * numel
    if spec.family == REDUCTION:
        source = classifier.value(spec.args["input"])
        return int(source.numel()) if isinstance(source, torch.Tensor) else 0
    if op in ("max_pool2d", "avg_pool2d") and spec.node.op == "call_module":
        module = classifier.root.get_submodule(str(spec.node.target))
        kernel = module.kernel_size if isinstance(module.kernel_size, tuple) else (module.kernel_size,) * 2
        return numel * math.prod(kernel)
    if spec.family in (VIEW, SCALAR, INPUT, ATTR, OUTPUT):
        return 0
    return numel * _ELEMENTWISE_FLOPS.get(op, 1)


def op_info(classifier: Classifier, spec: OpSpec, covered: bool) -> OpInfo:
    """The plan's record of one operator."""
    out = classifier.value(spec.node)
    if isinstance(out, tuple):
        out = next((v for v in out if isinstance(v, torch.Tensor)), None)
    inputs = _tensor_inputs(classifier, spec)
    reads = 0 if spec.family == VIEW else sum(_nbytes(v) for v in inputs)
    writes = 0 if spec.family == VIEW else _nbytes(out)
    return OpInfo(
        node=spec.name,
        op=spec.op,
        target=spec.target,
        inputs=[s for s in (tensor_spec(v) for v in inputs) if s is not None],
        output=tensor_spec(out),
        flops=op_flops(classifier, spec),
        bytes=reads + writes,
        covered=covered,
    )
