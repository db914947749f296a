"""Attention as one operator (family ATTENTION): `softmax(q k^T * scale [causal]) v` for our fused kernel.

Why a module of its own: the decompositions of `F.scaled_dot_product_attention` and
`nn.MultiheadAttention` (decompose.py) record the whole product as one call of
`_stitch_attention_math` (or `_stitch_attention_masked_math` with a float32 mask added to the scores,
or a bool mask whose True keeps or masks a key)
when templates/attention.cuh can run it, so the scores never go through global memory; what it cannot
run (head dims past 128, other dtypes or ranks, a causal mask with Tq != Tk, whose
diagonal the kernel places bottom-right where PyTorch places it top-left) stays written out. MHA's
weights are only known to be read after the trace: `unfuse_read_weights` turns a fused call whose
written-out weights survived back into `weights @ v`. Chains written out by hand (MinGPT's
masked_fill of a buffer) become `_stitch_attention_masked_math` too (attention_chain.py), with the
mask compared with a number in the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from codegen.emit.runtime import _stitch_attention_masked_math, _stitch_attention_math
from codegen.frontend.trace_values import meta_of

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

ATTENTION = "attention"  # the family of fused attention products
ATTENTION_OPS = frozenset({"attention"})
ATTENTION_FUNCTIONS: list[tuple[str, list[Any]]] = [
    ("attention", [_stitch_attention_math, _stitch_attention_masked_math])
]
MAX_HEAD_DIM = 128  # the template's largest instantiation (it refuses larger ones with 801)
# the kernel's STITCH_ATTN_EQ..DROP codes (templates/attention.cuh): a comparison of a float32 mask whose
# true scores take the fill value, "add" (a float32 mask added to the scaled scores), or a bool mask
# whose True keeps ("keep", SDPA's meaning) or masks ("drop", MHA's) a key with the fill value
BOOL_MASKS = frozenset({"keep", "drop"})
MASK_MODES = {"eq": 1, "ne": 2, "lt": 3, "le": 4, "gt": 5, "ge": 6, "add": 7, "keep": 8, "drop": 9}
WEIGHTS = "stitch_attention_weights"  # node.meta key: the written-out weights of an MHA call


@dataclass(frozen=True)
class AttentionDims:
    """Sizes of one attention product; rank-3 operands (BH, T, D) count as H = 1."""

    batch: int
    heads: int
    tq: int
    tk: int
    d: int
    dv: int
    rank: int
    causal: bool

    @property
    def pairs(self) -> int:
        """Query-key pairs whose score counts (PyTorch's causal mask keeps key j <= query i)."""
        if not self.causal:
            return self.tq * self.tk
        diagonal = min(self.tq, self.tk)
        return diagonal * (diagonal + 1) // 2 + (self.tq - diagonal) * self.tk


def attention_dims(q: Any, k: Any, v: Any, causal: bool) -> AttentionDims | None:
    """The product's sizes when the fused kernel computes exactly what PyTorch does, else None."""
    tensors = (q, k, v)
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in tensors):
        return None
    rank = q.dim()
    if rank not in (3, 4) or k.dim() != rank or v.dim() != rank:
        return None
    lead = tuple(q.shape[:-2])
    if tuple(k.shape[:-2]) != lead or tuple(v.shape[:-2]) != lead:
        return None  # broadcast batch or head dims stay written out
    tq, d = int(q.shape[-2]), int(q.shape[-1])
    tk, dv = int(k.shape[-2]), int(v.shape[-1])
    if int(k.shape[-1]) != d or int(v.shape[-2]) != tk or tk == 0 or min(d, dv) < 1:
        return None
    if max(d, dv) > MAX_HEAD_DIM or (causal and tq != tk):
        return None
    batch, heads = (int(lead[0]), int(lead[1])) if rank == 4 else (int(lead[0]), 1)
    return AttentionDims(batch, heads, tq, tk, d, dv, rank, bool(causal))


def record_fused(
    tracer: fx.Tracer,
    q: Any,
    k: Any,
    v: Any,
    scale: float,
    causal: bool,
    weights: Any = None,
    mask: Any = None,
    mode: str = "add",
) -> Any:
    """The proxy of one fused call, or None when the kernel cannot compute it (the caller writes it out).
    `weights`: the written-out weights of the same product, kept if the trace ends up reading them;
    `mask`: a float32 tensor added to the scaled scores (mode "add", SDPA's float attn_mask), or a bool
    one whose True keeps (mode "keep", SDPA's meaning) or masks ("drop", MHA's) a key."""
    if not all(isinstance(t, fx.Proxy) for t in (q, k, v)):
        return None
    dims = attention_dims(meta_of(tracer, q), meta_of(tracer, k), meta_of(tracer, v), causal)
    if dims is None:
        return None
    if mask is None:
        target: Any = _stitch_attention_math
        args: tuple[Any, ...] = (q, k, v, float(scale), causal)
    else:
        meta = meta_of(tracer, mask)
        fill = 0.0 if mode == "add" else float("-inf")
        if causal or meta is None or not _mask_fits(meta, mode, 0.0, fill, dims):
            return None
        target = _stitch_attention_masked_math
        args = (q, k, v, float(scale), mask, mode, 0.0, fill)
    proxy = tracer.create_proxy("call_function", target, args, {}, name="attention")
    if weights is not None:
        proxy.node.meta[WEIGHTS] = weights.node
    return proxy


def unfuse_read_weights(graph: fx.Graph, values: dict[fx.Node, Any]) -> None:
    """A fused call whose MHA weights something reads becomes `weights @ v` again (today's written-out
    form: the weights are computed anyway); one whose weights were dropped unread stays fused."""
    live = set(graph.nodes)
    for node in list(graph.nodes):
        weights = node.meta.pop(WEIGHTS, None)  # no reference to a dropped node stays behind
        fused = node.target is _stitch_attention_math or node.target is _stitch_attention_masked_math
        if not fused or weights is None or weights not in live:
            continue
        with graph.inserting_after(node):
            product = graph.call_function(torch.matmul, (weights, node.args[2]))
        node.replace_all_uses_with(product)
        graph.erase_node(node)
        values[product] = values.pop(node, None)


def classify_attention(classifier: Classifier, spec: OpSpec) -> None:
    """Fill `spec` (family ATTENTION: q, k, v nodes, scale, causal, dims, and the tensor mask as
    (node, comparison, number, fill) or None) or reject it with a reason."""
    node = spec.node
    masked = node.target is _stitch_attention_masked_math
    if node.op != "call_function" or node.kwargs or len(node.args) != (8 if masked else 5):
        classifier.reject(spec, "attention: unexpected arguments")
        return
    q, k, v, scale = node.args[:4]
    causal = False if masked else node.args[4]
    mask = tuple(node.args[4:]) if masked else None  # (tensor, mode, number, fill)
    if not isinstance(scale, float) or not isinstance(causal, bool):
        classifier.reject(spec, "attention: scale and causal must be constants")
        return
    dims = attention_dims(classifier.value(q), classifier.value(k), classifier.value(v), causal)
    if dims is None:
        classifier.reject(spec, f"attention: needs float32 3-D/4-D q, k, v, head dims <= {MAX_HEAD_DIM}")
        return
    if mask is not None and not _mask_fits(classifier.value(mask[0]), mask[1], mask[2], mask[3], dims):
        classifier.reject(
            spec, "attention: the mask must be a float32 or bool tensor that broadcasts to the scores"
        )
        return
    spec.family = ATTENTION
    spec.args = {"q": q, "k": k, "v": v, "scale": scale, "causal": causal, "dims": dims, "mask": mask}
    spec.args["merge_heads"] = dims.rank == 4 and _read_head_merged(node)


def _read_head_merged(node: fx.Node) -> bool:
    """The output's only reader swaps dims 1 and 2 (`transpose(1, 2)`, or `permute(0, 2, 1, 3)` as the
    MHA decomposition writes it): the head merge before `.contiguous()` / `.reshape(B, T, C)`. The kernel
    then writes (B, T, H, Dv) memory, the swapped view is contiguous and the merge copies nothing (the
    COPY group's `contiguous` aliases a contiguous input). Only then: any other reader gets the
    (B, H, T, Dv) layout the trace saw."""
    users = list(node.users)
    if len(users) != 1 or users[0].op != "call_method" or users[0].kwargs:
        return False
    reader = users[0]
    given: list[Any] = list(reader.args[1:])
    if reader.target == "permute" and len(given) == 1 and isinstance(given[0], (tuple, list)):
        given = list(given[0])
    dims = [d % 4 for d in given if isinstance(d, int)]
    if not dims or len(dims) != len(given):
        return False
    if reader.target == "transpose":
        return sorted(dims) == [1, 2]
    return reader.target == "permute" and dims == [0, 2, 1, 3]


def _mask_fits(tensor: Any, compare: Any, rhs: Any, fill: Any, p: AttentionDims) -> bool:
    """The kernel reads `tensor` as the mask of mode `compare` (bool for keep / drop, else float32)."""
    scores = (p.batch, p.heads, p.tq, p.tk) if p.rank == 4 else (p.batch, p.tq, p.tk)
    dtype = torch.bool if compare in BOOL_MASKS else torch.float32
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype or tensor.dim() > p.rank:
        return False
    if compare not in MASK_MODES or not all(isinstance(x, float) for x in (rhs, fill)):
        return False
    return broadcasts_to(tuple(tensor.shape), scores)


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """A tensor of `shape` expands to `target` without changing it (what the kernel reads by strides)."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target), strict=False))


def attention_flops(spec: OpSpec) -> int:
    """2 x multiply-adds of q k^T and p v plus ~5 per score for the softmax, over the pairs that count
    (about half when causal: the kernel skips key tiles past the diagonal)."""
    p: AttentionDims = spec.args["dims"]
    return p.batch * p.heads * p.pairs * (2 * p.d + 2 * p.dv + 5)
