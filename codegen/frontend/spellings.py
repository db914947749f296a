"""The many spellings of each operator, mapped to one canonical op name, and their argument names.

Why a module of its own: `torch.relu`, `F.relu`, `x.relu_()` and `nn.ReLU` are one operator; these
tables (functions by identity, tensor methods and modules by name or class, positional signatures)
are data the classifier (codegen/frontend/ops.py) reads, kept apart from its decisions.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from codegen.frontend import activation_ops as act
from codegen.frontend.attention_ops import ATTENTION_FUNCTIONS
from codegen.frontend.axis_ops import AXIS_FUNCTIONS
from codegen.frontend.conv_ops import CONV_FUNCTIONS, CONV_MODULES
from codegen.frontend.layout_ops import COPY_FUNCTIONS
from codegen.frontend.mask_ops import MASK_FUNCTIONS
from codegen.frontend.norm_ops import NORM_FUNCTIONS, NORM_MODULES
from codegen.frontend.pool_ops import POOL_FUNCTIONS, POOL_MODULES
from codegen.frontend.rnn_ops import RNN_MODULES
from codegen.frontend.scan_ops import SCAN_FUNCTIONS


def _collect(pairs: list[tuple[str, list[Any]]]) -> dict[int, str]:
    table: dict[int, str] = {}
    for canonical, objects in pairs:
        for obj in objects:
            if obj is not None:
                table[id(obj)] = canonical
    return table


def _maybe(owner: Any, name: str) -> Any:
    return getattr(owner, name, None)


FUNCTIONS: dict[int, str] = _collect(
    [
        ("relu", [torch.relu, F.relu, _maybe(torch, "relu_"), _maybe(F, "relu_")]),
        ("gelu", [F.gelu, _maybe(torch._C._nn, "gelu")]),
        ("silu", [F.silu, _maybe(torch._C._nn, "silu")]),
        ("sigmoid", [torch.sigmoid, _maybe(F, "sigmoid"), _maybe(torch.special, "expit")]),
        ("tanh", [torch.tanh, _maybe(F, "tanh")]),
        ("exp", [torch.exp]),
        ("log", [torch.log]),
        ("abs", [torch.abs, operator.abs]),
        ("sqrt", [torch.sqrt]),
        ("rsqrt", [torch.rsqrt]),
        ("neg", [torch.neg, operator.neg]),
        ("erf", [torch.erf]),
        ("erfc", [torch.erfc, torch.special.erfc]),
        ("logaddexp", [torch.logaddexp]),
        ("sin", [torch.sin]),
        ("cos", [torch.cos]),
        ("reciprocal", [torch.reciprocal]),
        ("square", [torch.square]),
        ("log1p", [torch.log1p]),
        ("expm1", [torch.expm1]),
        ("clamp", [torch.clamp, torch.clip]),
        ("hardtanh", [F.hardtanh]),
        ("relu6", [F.relu6]),
        ("leaky_relu", [F.leaky_relu]),
        ("elu", [F.elu]),
        ("softplus", [F.softplus, _maybe(torch._C._nn, "softplus")]),
        ("mish", [F.mish]),
        ("hardswish", [F.hardswish]),
        ("hardsigmoid", [F.hardsigmoid]),
        ("add", [operator.add, operator.iadd, torch.add]),
        ("sub", [operator.sub, operator.isub, torch.sub, torch.subtract]),
        ("mul", [operator.mul, operator.imul, torch.mul, torch.multiply]),
        ("div", [operator.truediv, operator.itruediv, torch.div, torch.true_divide, torch.divide]),
        ("pow", [operator.pow, torch.pow]),
        ("maximum", [torch.maximum]),
        ("minimum", [torch.minimum]),
        ("xlogy", [torch.xlogy, torch.special.xlogy]),
        ("dropout", [F.dropout, torch.dropout]),
        ("linear", [F.linear, _maybe(torch._C._nn, "linear")]),
        ("matmul", [torch.matmul, operator.matmul]),
        ("mm", [torch.mm]),
        ("bmm", [torch.bmm]),
        ("addmm", [torch.addmm]),
        ("softmax", [F.softmax, torch.softmax, _maybe(torch.special, "softmax")]),
        ("log_softmax", [F.log_softmax, torch.log_softmax]),
        ("layer_norm", [F.layer_norm, torch.layer_norm]),
        ("sum", [torch.sum]),
        ("mean", [torch.mean]),
        ("amax", [torch.amax]),
        ("amin", [torch.amin]),
        ("max", [torch.max]),
        ("min", [torch.min]),
        ("prod", [torch.prod]),
        *AXIS_FUNCTIONS,
        *ATTENTION_FUNCTIONS,
        ("view", [torch.reshape, torch.flatten, torch.transpose, torch.permute, torch.unsqueeze]),
        ("view", [torch.squeeze, torch.t, torch.split, torch.chunk, torch.unbind, torch.narrow]),
        ("view", [torch.swapaxes, torch.movedim, torch.select, torch.detach]),
        *CONV_FUNCTIONS,
        *POOL_FUNCTIONS,
        *NORM_FUNCTIONS,
        *SCAN_FUNCTIONS,
        *COPY_FUNCTIONS,
        *MASK_FUNCTIONS,
        *act.ACTIVATION_FUNCTIONS,
        ("batch_norm", [F.batch_norm]),
        ("cat", [torch.cat, torch.concat]),
    ]
)

METHOD_ALIASES = {
    "relu_": "relu",
    "sigmoid_": "sigmoid",
    "tanh_": "tanh",
    "clamp_": "clamp",
    "clip": "clamp",
    "clip_": "clamp",
    "add_": "add",
    "sub_": "sub",
    "mul_": "mul",
    "div_": "div",
    "subtract": "sub",
    "multiply": "mul",
    "divide": "div",
    "true_divide": "div",
    "exp_": "exp",
    "neg_": "neg",
    "abs_": "abs",
    "sqrt_": "sqrt",
    "pow_": "pow",
}
ELEMENTWISE_METHODS = frozenset(
    {"relu", "sigmoid", "tanh", "exp", "log", "abs", "sqrt", "rsqrt", "neg", "erf", "sin", "cos"}
    | {"reciprocal", "square", "log1p", "expm1", "clamp", "add", "sub", "mul", "div", "pow"}
    | {"maximum", "minimum", "xlogy", "erfc", "logaddexp"}
)
VIEW_METHODS = frozenset(
    {"view", "reshape", "permute", "transpose", "t", "unsqueeze", "squeeze", "flatten", "expand"}
    | {"expand_as", "view_as", "reshape_as", "narrow", "select", "unflatten", "split", "chunk"}
    | {"unbind", "detach", "movedim", "swapaxes", "size", "dim", "numel"}
)
OTHER_METHOD_NAMES = {"contiguous": "contiguous", "clone": "clone", "to": "to", "float": "to"}

MODULES: list[tuple[type, str]] = [
    (nn.Linear, "linear"),
    (nn.ReLU, "relu"),
    (nn.GELU, "gelu"),
    (nn.SiLU, "silu"),
    (nn.Sigmoid, "sigmoid"),
    (nn.Tanh, "tanh"),
    (nn.ReLU6, "relu6"),
    (nn.Hardtanh, "hardtanh"),
    (nn.LeakyReLU, "leaky_relu"),
    (nn.ELU, "elu"),
    (nn.Softplus, "softplus"),
    (nn.Mish, "mish"),
    (nn.Hardswish, "hardswish"),
    (nn.Hardsigmoid, "hardsigmoid"),
    (nn.Identity, "identity"),
    (nn.Dropout, "dropout"),
    (nn.Softmax, "softmax"),
    (nn.LogSoftmax, "log_softmax"),
    (nn.LayerNorm, "layer_norm"),
    (nn.BatchNorm1d, "batch_norm"),
    (nn.BatchNorm2d, "batch_norm"),
    (nn.BatchNorm3d, "batch_norm"),
    *CONV_MODULES,
    *POOL_MODULES,
    *NORM_MODULES,
    *act.ACTIVATION_MODULES,
    *RNN_MODULES,
    (nn.Flatten, "view"),
    (nn.Unflatten, "view"),
]

ELEMENTWISE_OPS = frozenset(
    {"relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "abs", "sqrt", "rsqrt", "neg", "erf"}
    | {"sin", "cos", "reciprocal", "square", "log1p", "expm1", "clamp", "hardtanh", "relu6"}
    | {"leaky_relu", "elu", "softplus", "mish", "hardswish", "hardsigmoid", "add", "sub", "mul"}
    | {"div", "pow", "maximum", "minimum", "xlogy", "identity", "dropout", "erfc", "logaddexp"}
    | act.ACTIVATION_OPS
)
REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "prod"})
GEMMS = frozenset({"linear", "matmul", "mm", "bmm", "addmm"})

# Positional signatures (after the input) used to bind call_function / call_method arguments.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "gelu": ("input", "approximate"),
    "clamp": ("input", "min", "max"),
    "hardtanh": ("input", "min_val", "max_val", "inplace"),
    "relu6": ("input", "inplace"),
    "relu": ("input", "inplace"),
    "leaky_relu": ("input", "negative_slope", "inplace"),
    "elu": ("input", "alpha", "inplace"),
    "softplus": ("input", "beta", "threshold"),
    "mish": ("input", "inplace"),
    "hardswish": ("input", "inplace"),
    "hardsigmoid": ("input", "inplace"),
    "silu": ("input", "inplace"),
    "add": ("input", "other", "alpha"),
    "sub": ("input", "other", "alpha"),
    "mul": ("input", "other"),
    "div": ("input", "other", "rounding_mode"),
    "pow": ("input", "exponent"),
    "maximum": ("input", "other"),
    "minimum": ("input", "other"),
    "xlogy": ("input", "other"),
    "logaddexp": ("input", "other"),
    "dropout": ("input", "p", "training", "inplace"),
    "linear": ("input", "weight", "bias"),
    "matmul": ("input", "other"),
    "mm": ("input", "mat2"),
    "bmm": ("input", "mat2"),
    "addmm": ("input", "mat1", "mat2", "beta", "alpha"),
    "softmax": ("input", "dim", "_stacklevel", "dtype"),
    "log_softmax": ("input", "dim", "_stacklevel", "dtype"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
    "sum": ("input", "dim", "keepdim", "dtype"),
    "mean": ("input", "dim", "keepdim", "dtype"),
    "amax": ("input", "dim", "keepdim"),
    "amin": ("input", "dim", "keepdim"),
    "max": ("input", "dim", "keepdim"),
    "min": ("input", "dim", "keepdim"),
    "prod": ("input", "dim", "keepdim", "dtype"),
    **act.ACTIVATION_SIGNATURES,
}


def bind(node: fx.Node, op: str) -> dict[str, Any]:
    """Bind a call_function/call_method node's arguments to the names of `SIGNATURES[op]`."""
    names = SIGNATURES.get(op, ("input",))
    bound: dict[str, Any] = {}
    for name, value in zip(names, node.args, strict=False):
        bound[name] = value
    for i in range(len(names), len(node.args)):
        bound[f"arg{i}"] = node.args[i]
    for key, value in node.kwargs.items():
        bound["input" if key == "self" else key] = value
    return bound


def target_text(node: fx.Node, root: nn.Module) -> str:
    """How the reference spells the call, for reports."""
    if node.op == "call_module":
        return f"self.{node.target} ({type(root.get_submodule(str(node.target))).__name__})"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_function":
        module = getattr(node.target, "__module__", None) or ""
        name = getattr(node.target, "__name__", repr(node.target))
        return f"{module}.{name}" if module else name
    return str(node.target)
