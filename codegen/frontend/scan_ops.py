"""Classify scans (cumsum, cumprod) along any dim, with the patterns KernelBench builds around them.

Why a module of its own: a scan is one kernel that also absorbs the non-elementwise ops written
around it, which no other family can take:
- reverse scans spelled `x.flip(d).cumsum(d).flip(d)`: the kernel walks each row backwards, so
  neither flip is a copy;
- masked scans `cumsum(x * mask)` with a bool `mask`: the kernel multiplies by the mask on load
  (a float mask is an ordinary elementwise prologue and needs nothing here);
- exclusive scans `cumsum(x) - x` are a plain elementwise epilogue.
The absorbed nodes are listed in `args['lead']` (before the scan) and `args['trail']` (after it);
the fusion planner puts them in the scan's group.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

SCAN = "scan"  # the family of inclusive scans along one dim
SCAN_OPS = frozenset({"cumsum", "cumprod"})
SCAN_FUNCTIONS: list[tuple[str, list[Any]]] = [
    ("cumsum", [torch.cumsum]),
    ("cumprod", [torch.cumprod]),
    ("flip", [torch.flip]),
]
_MUL_TARGETS = (operator.mul, torch.mul, torch.multiply)


def _scan_arguments(node: fx.Node) -> tuple[Any, Any, Any]:
    """(input, dim, dtype) of a cumsum / cumprod call in any spelling."""
    args = list(node.args)
    kwargs = dict(node.kwargs)
    x = args[0] if args else kwargs.get("input", kwargs.get("self"))
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    dtype = args[2] if len(args) > 2 else kwargs.get("dtype")
    return x, dim, dtype


def _flip_dims(node: Any) -> list[int] | None:
    """The dims of a `torch.flip(x, dims)` / `x.flip(*dims)` node, or None when it is no flip."""
    if not isinstance(node, fx.Node):
        return None
    if node.op == "call_function" and node.target is torch.flip:
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dims")
    elif node.op == "call_method" and node.target == "flip":
        rest = node.args[1:]
        dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
        dims = dims or node.kwargs.get("dims")
    else:
        return None
    if isinstance(dims, int):
        dims = [dims]
    if not isinstance(dims, (tuple, list)) or not all(isinstance(d, int) for d in dims):
        return None
    return list(dims)


def _is_flip_of(node: Any, dim: int, ndim: int) -> bool:
    dims = _flip_dims(node)
    return dims is not None and len(dims) == 1 and dims[0] % ndim == dim


def _bool_mask_product(classifier: Classifier, node: Any) -> tuple[Any, Any] | None:
    """(float operand, bool mask) when `node` is `x * mask` with a same-shape bool mask, else None."""
    if not isinstance(node, fx.Node) or len(node.users) != 1 or node.kwargs:
        return None
    is_mul = (node.op == "call_function" and node.target in _MUL_TARGETS) or (
        node.op == "call_method" and node.target == "mul"
    )
    if not is_mul or len(node.args) != 2:
        return None
    values = [classifier.value(a) for a in node.args]
    out = classifier.value(node)
    if not all(isinstance(v, torch.Tensor) for v in values) or not isinstance(out, torch.Tensor):
        return None
    for x_ref, m_ref, x, m in ((*node.args, *values), (node.args[1], node.args[0], values[1], values[0])):
        same = tuple(x.shape) == tuple(m.shape) == tuple(out.shape)
        if same and x.dtype == torch.float32 and m.dtype == torch.bool and out.dtype == torch.float32:
            return x_ref, m_ref
    return None


def classify_scan(classifier: Classifier, spec: OpSpec) -> None:
    """Fill `spec` (family SCAN, args) or reject it with the reason it stays PyTorch."""
    node = spec.node
    if node.op == "call_module":
        classifier.reject(spec, f"{spec.op} as a module")
        return
    x, dim, dtype = _scan_arguments(node)
    value, out = classifier.value(x), classifier.value(node)
    if dtype is not None:
        classifier.reject(spec, f"{spec.op} with a dtype")
        return
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float32 or value.dim() == 0:
        classifier.reject(spec, f"{spec.op} of a non-float32 or 0-d tensor")
        return
    if not isinstance(out, torch.Tensor) or out.dtype != torch.float32:
        classifier.reject(spec, f"{spec.op} with a non-float32 result")
        return
    if not isinstance(dim, int) or isinstance(dim, bool):
        classifier.reject(spec, f"{spec.op} over a non-constant dim")
        return
    ndim = value.dim()
    dim %= ndim
    lead: list[fx.Node] = []
    trail: list[fx.Node] = []
    reverse = False
    users = list(node.users)
    if (
        isinstance(x, fx.Node)
        and _is_flip_of(x, dim, ndim)
        and len(x.users) == 1
        and len(users) == 1
        and _is_flip_of(users[0], dim, ndim)
    ):
        reverse = True
        lead.append(x)
        trail.append(users[0])
        x = x.args[0]
    mask = None
    masked = _bool_mask_product(classifier, x)
    if masked is not None:
        lead.insert(0, x)
        x, mask = masked
    spec.family = SCAN
    spec.args = {
        "input": x,
        "dim": dim,
        "reverse": reverse,
        "mask": mask,
        "lead": lead,
        "trail": trail,
    }
