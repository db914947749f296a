"""Attention written out by hand, found in a traced graph and made one fused call.

MinGPT and its kind spell attention as a chain of tensor ops rather than calling SDPA:
`softmax(masked_fill(q @ k.transpose(-2, -1) * s, bias[:, :, :T, :T] == 0, -inf)) @ v`. Written out,
the (B, H, T, T) scores make several round trips through global memory; our fused kernel
(templates/attention.cuh) computes the same thing with the mask tensor read per tile and compared in
registers. This pass runs on the captured graph (capture.py), where every node's meta value is known,
and replaces a chain it can prove equivalent with one `_stitch_attention_masked_math` call (or
`_stitch_attention_math` when there is no mask); anything it is unsure of stays written out.

A chain matches when each intermediate is read only by the next step:
matmul(q, transpose(k, -2, -1)) [* or / a number] [masked_fill(M OP number, number) or + M] softmax(-1)
[dropout with p = 0] matmul(., v), with float32 operands the kernel takes (attention_ops.attention_dims)
and a float32 mask tensor M that broadcasts to the scores (compared in the kernel, or added).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from codegen.emit.runtime import _stitch_attention_masked_math, _stitch_attention_math
from codegen.frontend.attention_ops import attention_dims, broadcasts_to
from codegen.frontend.mask_ops import comparison

_MATMULS = ((operator.matmul, torch.matmul, torch.bmm), ("matmul", "bmm"))
_SOFTMAX = ((torch.softmax, F.softmax), ("softmax",))
_MUL = ((operator.mul, torch.mul), ("mul",))
_DIV = ((operator.truediv, torch.div, torch.true_divide), ("div", "true_divide"))
_MASKED_FILL = ((torch.masked_fill,), ("masked_fill",))
_ADD = ((operator.add, torch.add), ("add",))
_TRANSPOSE = ((torch.transpose,), ("transpose",))
_DROPOUT = ((F.dropout, torch.dropout), ("dropout",))


class _Values:
    """The meta value of a node (constants as themselves): mask_ops.Values, for its comparison()."""

    def __init__(self, values: dict[fx.Node, Any]) -> None:
        self.values = values

    def value(self, ref: Any) -> Any:
        return self.values.get(ref) if isinstance(ref, fx.Node) else ref


def _calls(node: Any, spellings: tuple[tuple[Any, ...], tuple[str, ...]]) -> TypeGuard[fx.Node]:
    if not isinstance(node, fx.Node):
        return False
    functions, methods = spellings
    if node.op == "call_function":
        return any(node.target is f for f in functions)
    return node.op == "call_method" and node.target in methods


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _node(ref: Any) -> fx.Node | None:
    return ref if isinstance(ref, fx.Node) else None


def _sole_user(node: fx.Node) -> fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _tensor(values: dict[fx.Node, Any], ref: Any) -> torch.Tensor | None:
    value = values.get(ref) if isinstance(ref, fx.Node) else None
    return value if isinstance(value, torch.Tensor) and value.dtype == torch.float32 else None


@dataclass
class _Chain:
    """One matched chain: its operands, and the nodes the fused call replaces (first to last)."""

    q: fx.Node
    k: fx.Node
    v: fx.Node
    scale: float
    mask: tuple[fx.Node, str, float, float] | None  # (tensor, comparison or "add", number, fill)
    steps: list[fx.Node]
    absorbed: list[fx.Node]  # the transpose and the comparison, erased when nothing else reads them


def _transposed_key(values: dict[fx.Node, Any], node: Any) -> fx.Node | None:
    """k of `k.transpose(-2, -1)` (any spelling of the last two dims), else None."""
    if not _calls(node, _TRANSPOSE) or node.kwargs or len(node.args) != 3:
        return None
    k, a, b = _node(node.args[0]), node.args[1], node.args[2]
    kv = _tensor(values, k)
    if k is None or kv is None or not isinstance(a, int) or not isinstance(b, int):
        return None
    rank = kv.dim()
    return k if {a % rank, b % rank} == {rank - 2, rank - 1} else None


def _scaled(node: fx.Node, values: dict[fx.Node, Any]) -> tuple[fx.Node, float] | None:
    """(scores, factor) of `scores * c`, `c * scores` or `scores / c` where `scores` is a matmul and c
    a number or a scalar node."""
    if node.kwargs or len(node.args) != 2:
        return None
    a, b = node.args

    def number(ref: Any) -> float | None:
        return _number(values.get(ref) if isinstance(ref, fx.Node) else ref)

    if _calls(node, _MUL):
        source, other = (a, b) if _calls(a, _MATMULS) else (b, a)
        factor = number(other)
        return (source, factor) if _calls(source, _MATMULS) and factor is not None else None
    if _calls(node, _DIV) and _calls(a, _MATMULS):
        divisor = number(b)
        return (a, 1.0 / divisor) if divisor else None
    return None


def _mask(
    node: fx.Node, source: fx.Node, values: dict[fx.Node, Any]
) -> tuple[fx.Node, str, float, float] | None:
    """(mask tensor, comparison, number, fill) of `source.masked_fill(mask OP number, fill)`."""
    args = [*node.args, *(node.kwargs.get(name) for name in ("mask", "value") if name in node.kwargs)]
    if len(args) != 3 or args[0] is not source or set(node.kwargs) - {"mask", "value"}:
        return None
    where, fill = args[1], _number(args[2])
    if fill is None or not isinstance(where, fx.Node):
        return None
    found = comparison(_Values(values), where)
    if found is None:
        return None
    op, tensor, number = found
    rhs = _number(number)
    scores, mask = values.get(source), _tensor(values, tensor)
    if rhs is None or mask is None or not isinstance(tensor, fx.Node) or not isinstance(scores, torch.Tensor):
        return None
    if not broadcasts_to(tuple(mask.shape), tuple(scores.shape)):
        return None
    return tensor, op, rhs, fill


def _added(node: fx.Node, values: dict[fx.Node, Any]) -> tuple[fx.Node, fx.Node] | None:
    """(scores, mask) of `scores + mask` / `mask + scores`: scores a (scaled) matmul, the mask a float32
    tensor that broadcasts to them (an additive mask or bias)."""
    if node.kwargs or len(node.args) != 2:
        return None
    for scores, mask in (node.args, node.args[::-1]):
        if not (_calls(scores, _MATMULS) or _calls(scores, _MUL) or _calls(scores, _DIV)):
            continue
        tensor, out = _tensor(values, mask), values.get(scores)
        if tensor is None or not isinstance(mask, fx.Node) or not isinstance(out, torch.Tensor):
            continue
        if broadcasts_to(tuple(tensor.shape), tuple(out.shape)) and tuple(values[node].shape) == tuple(
            out.shape
        ):
            return scores, mask
    return None


def _softmax_last(node: fx.Node, values: dict[fx.Node, Any]) -> bool:
    args, kwargs = list(node.args), dict(node.kwargs)
    kwargs.pop("_stacklevel", None)
    if kwargs.pop("dtype", None) is not None or len(args) > 2:
        return False
    dim = args[1] if len(args) == 2 else kwargs.pop("dim", None)
    rank = values[node].dim() if isinstance(values.get(node), torch.Tensor) else 0
    return not kwargs and isinstance(dim, int) and rank > 0 and dim % rank == rank - 1


def _no_dropout(node: fx.Node, root: nn.Module) -> bool:
    """A dropout that changes nothing: p == 0 (KernelBench's MinGPT), or a functional one with training off."""
    if node.op == "call_module":
        module = root.get_submodule(str(node.target))
        return isinstance(module, nn.Dropout) and float(module.p) == 0.0
    if not _calls(node, _DROPOUT):
        return False
    bound = dict(zip(("input", "p", "training", "inplace"), node.args, strict=False)) | dict(node.kwargs)
    p, training = bound.get("p", 0.5), bound.get("training", True)
    return isinstance(p, (int, float)) and (float(p) == 0.0 or training is False) and not bound.get("inplace")


def _match(product: fx.Node, values: dict[fx.Node, Any], root: nn.Module) -> _Chain | None:
    """The chain ending at `product` (the `probs @ v` matmul), or None."""
    if not _calls(product, _MATMULS) or product.kwargs or len(product.args) != 2:
        return None
    probs, v = _node(product.args[0]), _node(product.args[1])
    steps = [product]
    if probs is not None and _no_dropout(probs, root) and _sole_user(probs) is product:
        steps.append(probs)
        probs = _node(probs.args[0]) if probs.args else None
    if not _calls(probs, _SOFTMAX) or _sole_user(probs) is not steps[-1] or not _softmax_last(probs, values):
        return None
    steps.append(probs)
    scores = _node(probs.args[0] if probs.args else probs.kwargs.get("input"))
    mask: tuple[fx.Node, str, float, float] | None = None
    absorbed: list[fx.Node] = []
    if _calls(scores, _MASKED_FILL) and _sole_user(scores) is probs:
        source = _node(scores.args[0]) if scores.args else None
        mask = _mask(scores, source, values) if source is not None else None
        if mask is None or source is None:
            return None
        steps.append(scores)
        where = _node(scores.args[1] if len(scores.args) > 1 else scores.kwargs.get("mask"))
        absorbed += [] if where is None else [where]
        scores = source
    elif _calls(scores, _ADD) and _sole_user(scores) is probs:
        biased = _added(scores, values)
        if biased is None:
            return None
        steps.append(scores)
        mask = (biased[1], "add", 0.0, 0.0)
        scores = biased[0]
    scale = 1.0
    if scores is not None and not _calls(scores, _MATMULS):
        scaled = _scaled(scores, values)
        if scaled is None or _sole_user(scores) is not steps[-1]:
            return None
        steps.append(scores)
        scores, scale = scaled
    if not _calls(scores, _MATMULS) or _sole_user(scores) is not steps[-1] or len(scores.args) != 2:
        return None
    steps.append(scores)
    q, kt = _node(scores.args[0]), _node(scores.args[1])
    k = _transposed_key(values, kt)
    if k is None or kt is None or q is None or v is None:
        return None
    absorbed.append(kt)
    if attention_dims(values.get(q), values.get(k), values.get(v), causal=False) is None:
        return None
    return _Chain(q, k, v, scale, mask, steps[::-1], absorbed)


def fuse_attention_chains(graph: fx.Graph, values: dict[fx.Node, Any], root: nn.Module) -> int:
    """Replace every written-out attention chain the fused kernel computes exactly; returns how many."""
    fused = 0
    for node in list(graph.nodes):  # a chain's other nodes come before its product: none is visited erased
        chain = _match(node, values, root) if node.op in ("call_function", "call_method") else None
        if chain is None:
            continue
        with graph.inserting_before(node):
            if chain.mask is None:
                target: Any = _stitch_attention_math
                args: tuple[Any, ...] = (chain.q, chain.k, chain.v, chain.scale, False)
            else:
                target = _stitch_attention_masked_math
                args = (chain.q, chain.k, chain.v, chain.scale, *chain.mask)
            call = graph.create_node("call_function", target, args, {}, name="attention")
        node.replace_all_uses_with(call)
        values[call] = values[node]
        inputs = [a for step in chain.steps for a in step.all_input_nodes if a not in chain.steps]
        for step in reversed(chain.steps):
            graph.erase_node(step)
            values.pop(step, None)
        _erase_unread(chain.absorbed, inputs, values)
        fused += 1
    return fused


def _erase_unread(absorbed: list[fx.Node], inputs: list[fx.Node], values: dict[fx.Node, Any]) -> None:
    """The transpose and comparison the call absorbed, and the size arithmetic of its scale, once
    nothing else reads them; tensors the chain read stay (the planner drops unread values itself)."""
    pending, erased = [*absorbed, *inputs], set()
    while pending:
        node = pending.pop()
        if node in erased or node.users or node.op not in ("call_function", "call_method"):
            continue
        if node not in absorbed and isinstance(values.get(node), torch.Tensor):
            continue
        pending += node.all_input_nodes
        node.graph.erase_node(node)
        values.pop(node, None)
        erased.add(node)
