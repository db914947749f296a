"""Classify the ops over one axis that need more state than a plain reduction: the AXIS family.

Why a family of its own: sum / mean / amax / amin / prod keep one float per output (REDUCTION,
templates/reduce.cuh). These keep a pair, so they share one template (templates/axis.cuh):
- argmax / argmin (`torch.argmax`, `x.argmin(dim, keepdim)`, dim=None over the flattened tensor)
  and `torch.max/min(x, dim)` whose indices are used: (best value, its index), int64 indices out;
  NaN wins and ties go to the first index, as PyTorch does;
- logsumexp over adjacent dims: (running max, sum of exp(x - max)), one pass;
- softmax / log_softmax over a dim that is not the last (e.g. the channels after a convolution):
  the same (max, sum) pair per [outer, n, inner] column, then one normalising pass.
Every input is viewed as [outer, n, inner] around the dims; the kernels read along `inner` coalesced.
`args['absorbed']` lists the getitem nodes of a `max/min(x, dim)` tuple that the kernel writes
itself; the fusion planner puts them in the group (values last, so a values epilogue fuses).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

AXIS = "axis"  # the family of pair-state ops along one axis (templates/axis.cuh)
AXIS_OPS = frozenset({"argmax", "argmin", "logsumexp"})
AXIS_FUNCTIONS: list[tuple[str, list[Any]]] = [
    ("argmax", [torch.argmax]),
    ("argmin", [torch.argmin]),
    ("logsumexp", [torch.logsumexp, getattr(torch.special, "logsumexp", None)]),
]
_SIGNATURE = ("input", "dim", "keepdim")


def _bound(node: fx.Node) -> dict[str, Any]:
    """(input, dim, keepdim) of argmax / argmin / logsumexp / max / min in any spelling."""
    if len(node.args) > len(_SIGNATURE):
        raise ValueError("unexpected extra arguments")
    bound = dict(zip(_SIGNATURE, node.args, strict=False))
    for key, value in node.kwargs.items():
        bound["input" if key == "self" else key] = value
    return bound


def _dims(dim: Any, ndim: int) -> list[int]:
    """Sorted adjacent dims of `dim` (an int or a sequence of ints); ValueError otherwise."""
    if isinstance(dim, int) and not isinstance(dim, bool):
        return [dim % ndim]
    if isinstance(dim, (tuple, list)) and dim and all(isinstance(d, int) for d in dim):
        dims = sorted({d % ndim for d in dim})
        if dims != list(range(dims[0], dims[-1] + 1)):
            raise ValueError(f"non-adjacent dims {dims}")
        return dims
    raise ValueError("a non-constant or empty dim")


def _tuple_items(node: fx.Node) -> dict[int, fx.Node] | None:
    """{0: values node, 1: indices node} of the users of a max/min tuple; None for other uses."""
    items: dict[int, fx.Node] = {}
    for user in node.users:
        if user.op != "call_function" or len(user.args) != 2:
            return None
        key = user.args[1]
        if user.target is operator.getitem and isinstance(key, int) and key in (0, 1):
            slot = key
        elif user.target is getattr and key in ("values", "indices"):
            slot = 0 if key == "values" else 1
        else:
            return None
        if slot in items:
            return None  # the same item read twice: left to PyTorch rather than merged
        items[slot] = user
    return items


def _float_input(classifier: Classifier, spec: OpSpec, x: Any) -> torch.Tensor:
    value = classifier.value(x)
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float32 or value.dim() == 0:
        raise ValueError("input is not a float32 tensor of at least one dim")
    return value


def classify_axis(classifier: Classifier, spec: OpSpec) -> None:
    """argmax / argmin / logsumexp: fill `spec` (family AXIS, args) or reject it, saying why."""
    try:
        if spec.node.op == "call_module":
            raise ValueError("as a module")
        bound = _bound(spec.node)
        x = bound.get("input")
        value = _float_input(classifier, spec, x)
        keepdim = bound.get("keepdim", False)
        if not isinstance(keepdim, bool):
            raise ValueError("a non-constant keepdim")
        dim = bound.get("dim")
        if spec.op == "logsumexp":
            dims = _dims(dim, value.dim())
        elif dim is None:
            dims = list(range(value.dim()))  # over the flattened tensor
        elif isinstance(dim, int) and not isinstance(dim, bool):
            dims = [dim % value.dim()]
        else:
            raise ValueError("a non-constant dim")
    except ValueError as exc:
        classifier.reject(spec, f"{spec.op}: {exc}")
        return
    is_arg = spec.op in ("argmax", "argmin")
    spec.family = AXIS
    spec.args = {
        "input": x,
        "dims": dims,
        "keepdim": keepdim,
        "values": None if is_arg else spec.node,
        "indices": spec.node if is_arg else None,
        "absorbed": [],
    }


def classify_indexed_extremum(classifier: Classifier, spec: OpSpec) -> None:
    """`torch.max/min(x, dim)` whose indices are used: one kernel writes both values and indices."""
    try:
        bound = _bound(spec.node)
        x, dim, keepdim = bound.get("input"), bound.get("dim"), bound.get("keepdim", False)
        value = _float_input(classifier, spec, x)
        if not isinstance(dim, int) or isinstance(dim, bool) or not isinstance(keepdim, bool):
            raise ValueError("a non-constant dim or keepdim")
        items = _tuple_items(spec.node)
        if not items:
            raise ValueError("the result tuple is used other than through its values and indices")
    except ValueError as exc:
        classifier.reject(spec, f"{spec.op}: {exc}")
        return
    spec.family = AXIS
    spec.op = "argmax" if spec.op == "max" else "argmin"
    values, indices = items.get(0), items.get(1)
    spec.args = {
        "input": x,
        "dims": [dim % value.dim()],
        "keepdim": keepdim,
        "values": values,
        "indices": indices,
        "absorbed": [n for n in (indices, values) if n is not None],
    }


def classify_axis_softmax(classifier: Classifier, spec: OpSpec, x: Any, dim: int) -> None:
    """softmax / log_softmax over a dim that is not the last (the caller checked dtype and dim)."""
    value = classifier.value(x)
    spec.family = AXIS
    spec.args = {"input": x, "dims": [dim % value.dim()], "keepdim": True, "values": spec.node}


def axis_flops(classifier: Classifier, spec: OpSpec) -> int:
    """One comparison (arg ops) or an exp and an add per input element; softmax as the SOFTMAX family."""
    source = classifier.value(spec.args["input"])
    numel = int(source.numel()) if isinstance(source, torch.Tensor) else 0
    if spec.op in ("softmax", "log_softmax"):
        return 5 * numel
    return numel * (3 if spec.op == "logsumexp" else 1)
