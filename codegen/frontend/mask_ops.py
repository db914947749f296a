"""Classify masked fills whose mask is a comparison, and clamps with tensor bounds, as elementwise ops.

Why a module of its own: the elementwise chains hold float values only, so a bool mask cannot be a
chain value. `x.masked_fill(a == b, v)` (MinGPT's causal mask: `att.masked_fill(self.bias[:, :, :T,
:T] == 0, float('-inf'))`) becomes one elementwise op `masked_fill_cmp` over the float operands
`x, a, b` that compares and selects in registers; the comparison node is absorbed (`args['lead']`),
never materialised, and the fill then fuses like any elementwise op (a GEMM's epilogue, a softmax's
prologue). `clamp(x, min=t, max=u)` with tensor bounds is `clamp_t` over `x, t, u`.
A comparison used any other way, or a mask that is already a bool tensor, stays PyTorch.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from codegen.frontend.families import ELEMENTWISE

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

MASK_OPS = frozenset({"masked_fill"})
COMPARE_OPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
COMPARE_C = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
MASK_FUNCTIONS: list[tuple[str, list[Any]]] = [
    ("masked_fill", [torch.masked_fill]),
    ("eq", [operator.eq, torch.eq]),
    ("ne", [operator.ne, torch.ne]),
    ("lt", [operator.lt, torch.lt]),
    ("le", [operator.le, torch.le]),
    ("gt", [operator.gt, torch.gt]),
    ("ge", [operator.ge, torch.ge]),
]
_FLIPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _float_operand(classifier: Classifier, ref: Any) -> bool:
    """A float32 tensor or a Python number (what an elementwise chain can load)."""
    value = classifier.value(ref)
    return (isinstance(value, torch.Tensor) and value.dtype == torch.float32) or _number(value)


def comparison(classifier: Classifier, node: Any) -> tuple[str, Any, Any] | None:
    """(op, a, b) when `node` compares two float operands elementwise (`a == 0`, `torch.lt(a, b)`)."""
    if not isinstance(node, fx.Node) or node.op not in ("call_function", "call_method") or node.kwargs:
        return None
    if node.op == "call_method":
        op = str(node.target)
    else:
        op = next((name for name, fns in MASK_FUNCTIONS if any(node.target is f for f in fns)), "")
    if op not in COMPARE_OPS or len(node.args) != 2:
        return None
    a, b = node.args
    result = classifier.value(node)
    if not isinstance(result, torch.Tensor) or result.dtype != torch.bool:
        return None
    if not (_float_operand(classifier, a) and _float_operand(classifier, b)):
        return None
    if not isinstance(classifier.value(a), torch.Tensor):  # `0 == a`: keep the tensor first
        a, b, op = b, a, _FLIPPED[op]
    return op, a, b


def _masked_fill_parts(classifier: Classifier, node: fx.Node) -> tuple[Any, Any, Any] | str:
    """(input, mask, value) of a masked_fill, or the reason it cannot be one elementwise op."""
    args = list(node.args)
    kwargs = dict(node.kwargs)
    x = args[0] if args else kwargs.get("input", kwargs.get("self"))
    mask = args[1] if len(args) > 1 else kwargs.get("mask")
    value = args[2] if len(args) > 2 else kwargs.get("value")
    if len(args) > 3 or set(kwargs) - {"input", "self", "mask", "value"}:
        return "masked_fill with unexpected arguments"
    if not _number(classifier.value(value)) or isinstance(value, fx.Node):
        return "masked_fill with a non-constant value"
    if classifier.is_inplace_node(node):
        return "in-place masked_fill_"
    if not isinstance(mask, fx.Node) or comparison(classifier, mask) is None:
        return "masked_fill with a mask that is not a comparison of float tensors"
    if len(mask.users) != 1:
        return "masked_fill whose mask is used elsewhere"
    out, xv = classifier.value(node), classifier.value(x)
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in (out, xv)):
        return "masked_fill of a non-float32 tensor"
    if tuple(out.shape) != tuple(xv.shape):
        return "masked_fill whose mask broadcasts the input"
    return x, mask, value


def classify_mask(classifier: Classifier, spec: OpSpec) -> None:
    """masked_fill(x, cmp(a, b), v) -> elementwise `masked_fill_cmp` over x, a, b (cmp absorbed)."""
    node = spec.node
    if node.op == "call_module":
        classifier.reject(spec, "masked_fill as a module")
        return
    parts = _masked_fill_parts(classifier, node)
    if isinstance(parts, str):
        classifier.reject(spec, parts)
        return
    x, mask, value = parts
    cmp = comparison(classifier, mask)
    assert cmp is not None
    op, a, b = cmp
    spec.op, spec.family = "masked_fill_cmp", ELEMENTWISE
    spec.args = {"operands": [x, a, b], "params": {"cmp": op, "value": float(value)}, "lead": [mask]}


def absorbed_comparison(classifier: Classifier, spec: OpSpec) -> bool:
    """Is `spec` a comparison whose only user is a masked_fill that absorbs it? Then it is elementwise
    (never a step of its own: the planner skips nodes listed in another spec's `lead`)."""
    node = spec.node
    if comparison(classifier, node) is None or len(node.users) != 1:
        return False
    (user,) = node.users
    is_fill = (user.op == "call_method" and user.target == "masked_fill") or (
        user.op == "call_function" and user.target is torch.masked_fill
    )
    if not is_fill or isinstance(_masked_fill_parts(classifier, user), str):
        return False
    op, a, b = comparison(classifier, node)  # type: ignore[misc]
    spec.op, spec.family = op, ELEMENTWISE
    spec.args = {"operands": [a, b], "params": {}, "absorbed": True}
    return True


def tensor_clamp(classifier: Classifier, spec: OpSpec) -> bool:
    """clamp(x, min=t, max=u) with a tensor bound -> elementwise `clamp_t` over x, t, u; False when
    the bounds are numbers (the ordinary clamp) or the arguments are not float tensors."""
    node = spec.node
    if node.op not in ("call_function", "call_method"):
        return False
    args, kwargs = list(node.args), dict(node.kwargs)
    x = args[0] if args else kwargs.get("input", kwargs.get("self"))
    lo = args[1] if len(args) > 1 else kwargs.get("min")
    hi = args[2] if len(args) > 2 else kwargs.get("max")
    bounds = [b for b in (lo, hi) if b is not None]
    if not any(isinstance(classifier.value(b), torch.Tensor) for b in bounds):
        return False
    if classifier.is_inplace_node(node) or len(args) > 3:
        classifier.reject(spec, "in-place clamp_ or extra arguments with tensor bounds")
        return True
    if not all(_float_operand(classifier, r) for r in (x, node, *bounds)):
        classifier.reject(spec, "clamp with non-float32 tensor bounds")
        return True
    operands = [x] + [b for b in (lo, hi) if b is not None]
    spec.op, spec.family = "clamp_t", ELEMENTWISE
    spec.args = {"operands": operands, "params": {"has_min": lo is not None, "has_max": hi is not None}}
    return True
