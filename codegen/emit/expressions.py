"""C expressions for elementwise ops, written to match PyTorch's fp32 CUDA math.

Precise math only (the program is built without --use_fast_math): erff for exact GELU, expf/tanhf,
IEEE division. NaN-propagating max/min/clamp helpers come from lib common.
"""

from __future__ import annotations

import math
import struct
from typing import Any

# Ops whose expression reads the element's linear index `ei` (in the chain's shape): the functors
# define it only for chains that hold one (codegen/emit/chain.py, functors.py).
INDEX_OPS = frozenset({"masked_fill_tri"})


class ExprError(ValueError):
    """An op or parameter the elementwise template cannot express; str() is one line."""


def c_float(value: float) -> str:
    """A float literal with the value PyTorch uses after rounding the Python scalar to float32."""
    value = float(value)
    if math.isnan(value):
        return "NAN"
    f32 = (
        struct.unpack("f", struct.pack("f", value))[0]
        if abs(value) < 3.5e38
        else math.copysign(math.inf, value)
    )
    if math.isinf(f32):
        return "INFINITY" if f32 > 0 else "(-INFINITY)"
    text = repr(f32)
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}f" if not text.startswith("-") else f"({text}f)"


def _param(params: dict[str, Any], name: str, default: float | None = None) -> str:
    value = params.get(name, default)
    if value is None:
        raise ExprError(f"missing parameter {name}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ExprError(f"parameter {name} is not a number")
    return c_float(value)


def _pow(a: str, exponent: str, exponent_value: Any) -> str:
    if isinstance(exponent_value, (int, float)) and not isinstance(exponent_value, bool):
        e = float(exponent_value)
        if e == 1.0:
            return a
        if e == 2.0:
            return f"({a} * {a})"
        if e == 3.0:
            return f"({a} * {a} * {a})"
        if e == 0.5:
            return f"sqrtf({a})"
        if e == -1.0:
            return f"(1.0f / {a})"
        if e == -0.5:
            return f"(1.0f / sqrtf({a}))"
        if e == 0.0:
            return "1.0f"
    return f"powf({a}, {exponent})"


def op_expr(op: str, args: list[str], params: dict[str, Any], constants: list[Any] | None = None) -> str:
    """The C expression of `op` applied to operand expressions `args` (constants: their Python values)."""
    constants = constants if constants is not None else [None] * len(args)
    a = args[0] if args else ""
    if op in ("identity",):
        return a
    if op == "relu":
        return f"({a} < 0.0f ? 0.0f : {a})"
    if op == "gelu":
        if params.get("approximate", "none") == "tanh":
            return f"(0.5f * {a} * (1.0f + tanhf(0.7978845608028654f * ({a} + 0.044715f * {a} * {a} * {a}))))"
        return f"(0.5f * {a} * (1.0f + erff({a} * 0.70710678118654752f)))"
    if op == "silu":
        return f"({a} / (1.0f + expf(-{a})))"
    if op == "sigmoid":
        return f"(1.0f / (1.0f + expf(-{a})))"
    simple = {
        "tanh": "tanhf",
        "exp": "expf",
        "log": "logf",
        "abs": "fabsf",
        "sqrt": "sqrtf",
        "erf": "erff",
        "erfc": "erfcf",  # not 1 - erf: that loses every digit where erfc is small
        "sin": "sinf",
        "cos": "cosf",
        "log1p": "log1pf",
        "expm1": "expm1f",
        "rsqrt": "rsqrtf",
    }
    if op in simple:
        return f"{simple[op]}({a})"
    if op == "neg":
        return f"(-{a})"
    if op == "reciprocal":
        return f"(1.0f / {a})"
    if op == "square":
        return f"({a} * {a})"
    if op == "clamp":
        lo, hi = params.get("min"), params.get("max")
        expr = a
        if lo is not None:
            expr = f"stitch_max({expr}, {c_float(lo)})"
        if hi is not None:
            expr = f"stitch_min({expr}, {c_float(hi)})"
        return expr
    if op in ("hardtanh", "relu6"):
        return f"stitch_clamp({a}, {_param(params, 'min_val', -1.0)}, {_param(params, 'max_val', 1.0)})"
    if op == "leaky_relu":
        return f"({a} > 0.0f ? {a} : {a} * {_param(params, 'negative_slope', 0.01)})"
    if op == "elu":
        return f"({a} > 0.0f ? {a} : {_param(params, 'alpha', 1.0)} * expm1f({a}))"
    if op == "softplus":
        beta, threshold = _param(params, "beta", 1.0), _param(params, "threshold", 20.0)
        return f"({a} * {beta} > {threshold} ? {a} : log1pf(expf({a} * {beta})) / {beta})"
    if op == "mish":
        return f"({a} * tanhf({a} > 20.0f ? {a} : log1pf(expf({a}))))"
    if op == "selu":  # scale * elu(x, alpha) with PyTorch's constants
        return f"(1.0507009873554805f * ({a} > 0.0f ? {a} : 1.6732632423543772f * expm1f({a})))"
    if op == "celu":
        alpha = _param(params, "alpha", 1.0)
        return f"({a} > 0.0f ? {a} : {alpha} * expm1f({a} / {alpha}))"
    if op == "softsign":
        return f"({a} / (1.0f + fabsf({a})))"
    if op == "logsigmoid":  # min(x, 0) - log1p(exp(-|x|)): no overflow for large |x|
        return f"(fminf({a}, 0.0f) - log1pf(expf(-fabsf({a}))))"
    if op == "tanhshrink":
        return f"({a} - tanhf({a}))"
    if op == "hardshrink":
        lambd = _param(params, "lambd", 0.5)
        return f"(({a} > {lambd} || {a} < -{lambd}) ? {a} : 0.0f)"
    if op == "softshrink":
        lambd = _param(params, "lambd", 0.5)
        return f"({a} > {lambd} ? {a} - {lambd} : ({a} < -{lambd} ? {a} + {lambd} : 0.0f))"
    if op == "hardsigmoid":
        return f"(stitch_clamp({a} + 3.0f, 0.0f, 6.0f) / 6.0f)"
    if op == "hardswish":
        return f"({a} * stitch_clamp({a} + 3.0f, 0.0f, 6.0f) / 6.0f)"
    if len(args) != 2 and op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "xlogy"):
        raise ExprError(f"{op} needs two operands")
    if op in ("add", "sub"):
        b = args[1]
        alpha = params.get("alpha", 1)
        if alpha != 1:
            b = f"({b} * {c_float(alpha)})"
        return f"({a} {'+' if op == 'add' else '-'} {b})"
    if op == "mul":
        return f"({a} * {args[1]})"
    if op == "div":
        return f"({a} / {args[1]})"
    if op == "pow":
        return _pow(a, args[1], constants[1])
    if op == "maximum":
        return f"stitch_max({a}, {args[1]})"
    if op == "minimum":
        return f"stitch_min({a}, {args[1]})"
    if op == "xlogy":  # PyTorch's: NaN if y is NaN, else 0 where x == 0, else x * log(y)
        b = args[1]
        return f"(isnan({b}) ? NAN : ({a} == 0.0f ? 0.0f : {a} * logf({b})))"
    if op == "masked_fill_cmp":  # x, a, b: a <cmp> b ? value : x (frontend/mask_ops.py)
        cmp = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[params["cmp"]]
        return f"(({args[1]} {cmp} {args[2]}) ? {_param(params, 'value')} : {a})"
    if op == "logaddexp":  # max + log1p(exp(-|a - b|)); two equal infinities give themselves, as ATen
        b = args[1]
        return f"((isinf({a}) && {a} == {b}) ? {a} : (fmaxf({a}, {b}) + log1pf(expf(-fabsf({a} - {b})))))"
    if op == "where_cmp":  # x, y, a, b: a <cmp> b ? x : y (frontend/mask_ops.py)
        cmp = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[params["cmp"]]
        return f"(({args[2]} {cmp} {args[3]}) ? {a} : {args[1]})"
    if op == "masked_fill_tri":  # x: value where tril/triu(ones(rows, cols), diagonal) (inverted) holds
        cols, rows, diag = int(params["cols"]), int(params["rows"]), int(params["diagonal"])
        offset = f"((ei % {cols}LL) - ((ei / {cols}LL) % {rows}LL))"  # column minus row
        inside = f"({offset} {'<=' if params['lower'] else '>='} {diag}LL)"
        masked = f"!{inside}" if params["invert"] else inside
        return f"({masked} ? {_param(params, 'value')} : {a})"
    if op == "clamp_t":  # x, [min], [max] as tensors: NaN-propagating like torch.clamp
        rest = list(args[1:])
        expr = a
        if params.get("has_min"):
            expr = f"stitch_max({expr}, {rest.pop(0)})"
        if params.get("has_max"):
            expr = f"stitch_min({expr}, {rest.pop(0)})"
        return expr
    if op == "bn_affine":  # (x - mean[c]) * scale[c] + beta[c]
        if len(args) == 4:
            return f"(({a} - {args[1]}) * {args[2]} + {args[3]})"
        return f"(({a} - {args[1]}) * {args[2]})"
    raise ExprError(f"no elementwise expression for {op}")
