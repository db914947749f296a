"""Classify masked fills whose mask is a comparison, and clamps with tensor bounds, as elementwise ops.

Why a module of its own: the elementwise chains hold float values only, so a bool mask cannot be a
chain value. `x.masked_fill(a == b, v)` (MinGPT's causal mask: `att.masked_fill(self.bias[:, :, :T,
:T] == 0, float('-inf'))`) becomes one elementwise op `masked_fill_cmp` over the float operands
`x, a, b` that compares and selects in registers; the comparison node is absorbed (`args['lead']`),
never materialised, and the fill then fuses like any elementwise op (a GEMM's epilogue, a softmax's
prologue). `torch.where(a < b, x, y)` (and `x.where(a < b, y)`) is likewise one `where_cmp` over
`x, y, a, b` (x and y tensors or numbers, broadcast like any elementwise operand).
`clamp(x, min=t, max=u)` with tensor bounds is `clamp_t` over `x, t, u`.
A triangle of ones (`~torch.tril(torch.ones(T, T, dtype=torch.bool))`, Mamba's segment-sum mask)
is computed in registers from each element's row and column (`masked_fill_tri`), the mask's nodes
absorbed. A comparison used any other way, or any other bool tensor mask, stays PyTorch.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.fx as fx

from codegen.frontend.families import ELEMENTWISE

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

MASK_OPS = frozenset({"masked_fill", "where"})
COMPARE_OPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
COMPARE_C = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
MASK_FUNCTIONS: list[tuple[str, list[Any]]] = [
    ("masked_fill", [torch.masked_fill]),
    ("where", [torch.where]),
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


class Values(Protocol):
    """What the comparison helpers read: the meta value of a node (constants as themselves). The
    classifier is one; attention_chain.py passes the capture's values before classification."""

    def value(self, ref: Any) -> Any: ...


def _float_operand(classifier: Values, ref: Any) -> bool:
    """A float32 tensor or a Python number (what an elementwise chain can load)."""
    value = classifier.value(ref)
    return (isinstance(value, torch.Tensor) and value.dtype == torch.float32) or _number(value)


def comparison(classifier: Values, node: Any) -> tuple[str, Any, Any] | None:
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
    is_triangle = isinstance(mask, fx.Node) and triangle_mask(classifier, mask) is not None
    if not isinstance(mask, fx.Node) or (comparison(classifier, mask) is None and not is_triangle):
        return "masked_fill with a mask that is neither a comparison of float tensors nor a triangle of ones"
    if len(mask.users) != 1:
        return "masked_fill whose mask is used elsewhere"
    out, xv = classifier.value(node), classifier.value(x)
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in (out, xv)):
        return "masked_fill of a non-float32 tensor"
    if tuple(out.shape) != tuple(xv.shape):
        return "masked_fill whose mask broadcasts the input"
    return x, mask, value


def _where_parts(classifier: Classifier, node: fx.Node) -> tuple[Any, Any, Any] | str:
    """(condition, x, y) of `torch.where(condition, x, y)` / `x.where(condition, y)`, or why it cannot
    be one elementwise op (the condition must be a comparison of float operands read only here)."""
    args, kwargs = list(node.args), dict(node.kwargs)
    method = node.op == "call_method"  # x.where(condition, y)
    names = ["self", "condition", "other"] if method else ["condition", "input", "other"]
    if len(args) > 3 or set(kwargs) - set(names):
        return "where with unexpected arguments"
    values = dict(zip(names, args, strict=False)) | kwargs
    if len(values) != 3:
        return "where with one argument (the indices of the true elements)"
    cond = values["condition"]
    x, y = values.get("input", values.get("self")), values["other"]
    if not isinstance(cond, fx.Node) or comparison(classifier, cond) is None:
        return "where with a condition that is not a comparison of float tensors"
    if len(cond.users) != 1:
        return "where whose condition is used elsewhere"
    out = classifier.value(node)
    if not isinstance(out, torch.Tensor) or out.dtype != torch.float32:
        return "where with a non-float32 result"
    if not (_float_operand(classifier, x) and _float_operand(classifier, y)):
        return "where choosing between values that are not float32 tensors or numbers"
    return cond, x, y


def _is_mask_user(classifier: Classifier, node: fx.Node) -> bool:
    """A masked_fill or where that can absorb its comparison (its other arguments are fine too)."""
    if (node.op == "call_method" and node.target == "masked_fill") or (
        node.op == "call_function" and node.target is torch.masked_fill
    ):
        return not isinstance(_masked_fill_parts(classifier, node), str)
    if (node.op == "call_method" and node.target == "where") or (
        node.op == "call_function" and node.target is torch.where
    ):
        return not isinstance(_where_parts(classifier, node), str)
    return False


def classify_mask(classifier: Classifier, spec: OpSpec) -> None:
    """masked_fill(x, cmp(a, b), v) -> elementwise `masked_fill_cmp` over x, a, b (cmp absorbed);
    where(cmp(a, b), x, y) -> `where_cmp` over x, y, a, b."""
    node = spec.node
    if node.op == "call_module":
        classifier.reject(spec, f"{spec.op} as a module")
        return
    if spec.op == "where":
        parts = _where_parts(classifier, node)
        if isinstance(parts, str):
            classifier.reject(spec, parts)
            return
        cond, x, y = parts
        op, a, b = comparison(classifier, cond)  # type: ignore[misc]
        spec.op, spec.family = "where_cmp", ELEMENTWISE
        spec.args = {"operands": [x, y, a, b], "params": {"cmp": op}, "lead": [cond]}
        return
    parts = _masked_fill_parts(classifier, node)
    if isinstance(parts, str):
        classifier.reject(spec, parts)
        return
    x, mask, value = parts
    triangle = triangle_mask(classifier, mask)
    if triangle is not None:
        rows, cols = triangle.rows, triangle.cols
        if tuple(classifier.value(x).shape)[-2:] != (rows, cols):
            classifier.reject(spec, "masked_fill whose triangle mask broadcasts other than over leading dims")
            return
        params: dict[str, Any] = {"rows": rows, "cols": cols, "diagonal": triangle.diagonal}
        params |= {"lower": triangle.lower, "invert": triangle.invert, "value": float(value)}
        spec.op, spec.family = "masked_fill_tri", ELEMENTWISE
        spec.args = {"operands": [x], "params": params, "lead": triangle.nodes}
        return
    cmp = comparison(classifier, mask)
    assert cmp is not None
    op, a, b = cmp
    spec.op, spec.family = "masked_fill_cmp", ELEMENTWISE
    spec.args = {"operands": [x, a, b], "params": {"cmp": op, "value": float(value)}, "lead": [mask]}


TRIANGLE_MASK_OPS = frozenset({"ones", "tril", "triu", "invert", "logical_not", "bitwise_not"})
_NOT_OPS = ("invert", "logical_not", "bitwise_not")


@dataclass
class TriangleMask:
    """`tril(ones(rows, cols, dtype=bool), diagonal)` (or triu), perhaps inverted: a mask that depends
    only on an element's row and column, computed in registers instead of read from memory."""

    rows: int
    cols: int
    diagonal: int
    lower: bool
    invert: bool
    nodes: list[fx.Node]  # ones, tril/triu, [invert]: graph order, absorbed by the masked_fill


def _only_argument(node: fx.Node) -> Any:
    return node.args[0] if node.args else node.kwargs.get("input", node.kwargs.get("self"))


def _constant_sizes(node: fx.Node) -> list[int] | None:
    """The sizes of `torch.ones(r, c, ...)` / `torch.ones((r, c), ...)` when they are constants."""
    sizes: Any = (
        node.args[0] if len(node.args) == 1 and isinstance(node.args[0], (list, tuple)) else node.args
    )
    sizes = node.kwargs.get("size", sizes)
    if not isinstance(sizes, (list, tuple)) or not all(type(v) is int for v in sizes):
        return None
    return list(sizes)


def triangle_mask(classifier: Classifier, mask: fx.Node) -> TriangleMask | None:
    """The triangle `mask` stands for, when it is one (each of its nodes used only on the way)."""
    if not isinstance(mask, fx.Node) or not mask.op.startswith("call"):
        return None
    value = classifier.value(mask)
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.dim() != 2:
        return None
    nodes = [mask]
    node, invert = mask, False
    if classifier.canonical(node) in _NOT_OPS and len(node.args) == 1 and not node.kwargs:
        inner = node.args[0]
        if not isinstance(inner, fx.Node) or not inner.op.startswith("call"):
            return None
        invert, node = True, inner
        nodes.insert(0, node)
    kind = classifier.canonical(node)
    diagonal = node.args[1] if len(node.args) > 1 else node.kwargs.get("diagonal", 0)
    ones = _only_argument(node)
    if kind not in ("tril", "triu") or type(diagonal) is not int or not isinstance(ones, fx.Node):
        return None
    if not ones.op.startswith("call") or classifier.canonical(ones) != "ones":
        return None
    sizes = _constant_sizes(ones)
    if sizes is None or len(sizes) != 2 or set(ones.kwargs) - {"size", "dtype", "device"}:
        return None
    nodes.insert(0, ones)
    if any(len(n.users) != 1 for n in nodes[:-1]):
        return None  # a piece of the mask is read elsewhere: it has to exist in memory
    return TriangleMask(sizes[0], sizes[1], diagonal, kind == "tril", invert, nodes)


def _is_masked_fill(node: fx.Node) -> bool:
    return (node.op == "call_method" and node.target == "masked_fill") or (
        node.op == "call_function" and node.target is torch.masked_fill
    )


def absorbed_triangle(classifier: Classifier, spec: OpSpec) -> bool:
    """Is `spec` a piece of a triangle mask that a masked_fill computes in registers? Then it is
    absorbed (listed in the fill's `args['lead']`, never a step of its own)."""
    node = spec.node
    while len(node.users) == 1:
        (user,) = node.users
        if _is_masked_fill(user):
            parts = _masked_fill_parts(classifier, user)
            if isinstance(parts, str) or parts[1] is not node:
                return False
            triangle = triangle_mask(classifier, node)
            if triangle is None or spec.node not in triangle.nodes:
                return False
            if tuple(classifier.value(parts[0]).shape)[-2:] != (triangle.rows, triangle.cols):
                return False
            spec.family, spec.reason = ELEMENTWISE, ""
            spec.args = {"operands": [], "params": {}, "absorbed": True}
            return True
        node = user
    return False


def absorbed_comparison(classifier: Classifier, spec: OpSpec) -> bool:
    """Is `spec` a comparison whose only user is a masked_fill or where that absorbs it? Then it is
    elementwise (never a step of its own: the planner skips nodes listed in another spec's `lead`)."""
    node = spec.node
    if comparison(classifier, node) is None or len(node.users) != 1:
        return False
    (user,) = node.users
    if not _is_mask_user(classifier, user):
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
