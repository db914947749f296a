"""Calls written out as the operators our templates cover, substituted while the tracer records.

Why: `nn.MultiheadAttention` and `F.scaled_dot_product_attention` would otherwise be one opaque
node each (a module call, a library function), left to PyTorch. Written out as projections
(cuBLASLt GEMMs) and `softmax(q @ k^T * scale [+ mask]) @ v` as one call our fused attention kernel
runs (attention_ops.py), every piece is an operator the fusion planner generates; what the kernel
cannot take stays `q @ k^T * scale` (a GEMM whose alpha takes the scale), masking, a row softmax (our
fused kernel) and `p @ v`.
`addmm` / `baddbmm` with scale factors or a full matrix to add are a GEMM and elementwise ops.
Norms and losses (decompose_losses.py), variance, binary cross entropy and lerp (decompose_stats.py),
einsum and unfold (decompose_layout.py), GLU, cosine similarity, pixel (un)shuffle and nearest
upsampling (decompose_shapes.py) are written out the same way; the tables at the end say what the
tracer substitutes.

Each decomposition is called with fx proxies, so what it computes is recorded node by node. It
returns NotImplemented for variants it does not write out (dropout in training, bias_k/bias_v,
padding masks, unbatched inputs); the tracer then records the original call as one node, which the
plan lists as uncovered with its name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from codegen.frontend.attention_ops import record_fused
from codegen.frontend.decompose_layout import LAYOUT_FUNCTIONS, LAYOUT_METHODS
from codegen.frontend.decompose_losses import LOSS_FUNCTIONS, LOSS_METHODS, LOSS_MODULES
from codegen.frontend.decompose_shapes import SHAPES_FUNCTIONS, SHAPES_MODULES
from codegen.frontend.decompose_stats import STATS_FUNCTIONS, STATS_METHODS, STATS_MODULES
from codegen.frontend.trace_values import dtype_of, is_f32, rank_of, shape_of


def _attend(
    tracer: fx.Tracer,
    q: Any,
    k: Any,
    v: Any,
    mask: Any,
    is_causal: bool,
    scale: float,
    need_weights: bool = False,
    true_masks: bool = False,
) -> tuple[Any, Any]:
    """softmax(q @ k^T * scale + mask) @ v over the last two dims; returns (context, weights).

    A float mask is added; a bool mask keeps the keys where it is True (SDPA's meaning), or masks
    them where `true_masks` (nn.MultiheadAttention's meaning: True is "not allowed to attend").

    Without a mask tensor, or with a float32 one (added in the kernel) or a bool one (read as bytes),
    the product is one fused call when our kernel can compute it (attention_ops.py). With
    `need_weights` (MHA's) the weights are written out as well; the capture keeps the fused call only
    if nothing reads them (attention_ops.unfuse_read_weights)."""
    is_bool = mask is not None and dtype_of(tracer, mask) == torch.bool
    mode = ("drop" if true_masks else "keep") if is_bool else "add"  # record_fused checks the dtype
    if not need_weights:
        fused = record_fused(tracer, q, k, v, scale, is_causal, mask=mask, mode=mode)
        if fused is not None:
            return fused, None
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if is_causal:
        upper = torch.ones_like(scores, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(upper, float("-inf"))
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask if true_masks else mask.logical_not(), float("-inf"))
        else:
            scores = scores + mask
    probs = torch.softmax(scores, dim=-1)
    fused = record_fused(tracer, q, k, v, scale, is_causal, probs, mask, mode) if need_weights else None
    return (torch.matmul(probs, v) if fused is None else fused), probs


def sdpa(
    tracer: fx.Tracer,
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    """`F.scaled_dot_product_attention` without dropout or grouped-query heads."""
    if dropout_p != 0.0 or enable_gqa or not isinstance(is_causal, bool) or rank_of(tracer, query) < 2:
        return NotImplemented
    if scale is not None and not isinstance(scale, (int, float)):
        return NotImplemented
    if is_causal and attn_mask is not None:
        return NotImplemented  # PyTorch rejects this combination; let it say so
    factor = float(scale) if scale is not None else 1.0 / math.sqrt(shape_of(tracer, query)[-1])
    if attn_mask is not None and dtype_of(tracer, attn_mask) is None:
        return NotImplemented
    return _attend(tracer, query, key, value, attn_mask, is_causal, factor)[0]


def _bind_mha(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    names: tuple[str, ...] = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask")
    names = (*names, "average_attn_weights", "is_causal")
    if len(args) > len(names):
        return None
    bound: dict[str, Any] = {"key_padding_mask": None, "need_weights": True, "attn_mask": None}
    bound.update(average_attn_weights=True, is_causal=False)
    bound.update(zip(names, args, strict=False))
    if set(kwargs) - set(names):
        return None
    bound.update(kwargs)
    return bound


def multihead_attention(tracer: fx.Tracer, module: nn.MultiheadAttention, *args: Any, **kwargs: Any) -> Any:
    """`nn.MultiheadAttention` (batched, no bias_k/bias_v, no padding mask, no dropout in training)."""
    bound = _bind_mha(args, kwargs)
    if bound is None or bound["key_padding_mask"] is not None:
        return NotImplemented
    query, key, value = bound["query"], bound["key"], bound["value"]
    blocked = module.bias_k is not None or module.add_zero_attn or (module.training and module.dropout > 0)
    if blocked or any(rank_of(tracer, t) != 3 for t in (query, key, value)):
        return NotImplemented
    if not isinstance(bound["is_causal"], bool) or not isinstance(bound["need_weights"], bool):
        return NotImplemented
    mask = bound["attn_mask"]
    if mask is not None and (dtype_of(tracer, mask) is None or rank_of(tracer, mask) != 2):
        return NotImplemented  # 3-D per-head masks are left to PyTorch
    is_causal = bound["is_causal"] and mask is None
    embed, heads = module.embed_dim, module.num_heads
    head_dim = embed // heads
    if module._qkv_same_embed_dim:
        weight, bias = module.in_proj_weight, module.in_proj_bias
        if query is key and key is value:
            q, k, v = F.linear(query, weight, bias).split(embed, dim=-1)
        else:
            b = [None] * 3 if bias is None else [bias[i * embed : (i + 1) * embed] for i in range(3)]
            q, k, v = (
                F.linear(t, weight[i * embed : (i + 1) * embed], b[i])
                for i, t in enumerate((query, key, value))
            )
    else:
        bias = module.in_proj_bias
        b = [None] * 3 if bias is None else [bias[i * embed : (i + 1) * embed] for i in range(3)]
        weights = (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight)
        q, k, v = (F.linear(t, w, bi) for t, w, bi in zip((query, key, value), weights, b, strict=True))
    # (batch, seq, embed) when batch_first, else (seq, batch, embed); heads go to (batch, heads, seq, dim)
    batch_dim, seq_dim = (0, 1) if module.batch_first else (1, 0)

    def heads_of(t: Any, seq: int, batch: int) -> Any:
        shaped = t.view(*((batch, seq) if module.batch_first else (seq, batch)), heads, head_dim)
        return shaped.transpose(1, 2) if module.batch_first else shaped.permute(1, 2, 0, 3)

    shape_q, shape_k = shape_of(tracer, query), shape_of(tracer, key)
    batch, seq_q, seq_k = shape_q[batch_dim], shape_q[seq_dim], shape_k[seq_dim]
    context, attn = _attend(
        tracer,
        heads_of(q, seq_q, batch),
        heads_of(k, seq_k, batch),
        heads_of(v, seq_k, batch),
        mask,
        is_causal,
        1.0 / math.sqrt(head_dim),
        bound["need_weights"],
        true_masks=True,
    )
    order = (0, 2, 1, 3) if module.batch_first else (2, 0, 1, 3)
    context = context.permute(*order).reshape(
        *((batch, seq_q) if module.batch_first else (seq_q, batch)), embed
    )
    out = F.linear(context, module.out_proj.weight, module.out_proj.bias)
    if not bound["need_weights"]:
        return out, None
    return out, attn.mean(dim=1) if bound["average_attn_weights"] else attn


def _is_scale(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scaled_sum(product: Any, input: Any, beta: Any, alpha: Any) -> Any:
    """beta * input + alpha * product; beta == 0 ignores input (its NaN and inf too), as PyTorch."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input if beta == 1 else input * beta)


def addmm(tracer: fx.Tracer, input: Any, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """`torch.addmm` / `c.addmm(a, b)` beyond a bias row: a GEMM, then the scaled add (elementwise ops the
    planner fuses as it fuses any).
    With beta = alpha = 1 and a row-vector input the call stays one GEMM whose cuBLASLt epilogue adds
    the bias."""
    if not (_is_scale(beta) and _is_scale(alpha)) or not is_f32(tracer, input, mat1, mat2):
        return NotImplemented
    if rank_of(tracer, mat1) != 2 or rank_of(tracer, mat2) != 2:
        return NotImplemented
    n = shape_of(tracer, mat2)[-1]
    if (
        beta == 1
        and alpha == 1
        and rank_of(tracer, input) in (1, 2)
        and shape_of(tracer, input) in ((n,), (1, n))
    ):
        return NotImplemented
    return _scaled_sum(torch.mm(mat1, mat2), input, beta, alpha)


def baddbmm(tracer: fx.Tracer, input: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """`torch.baddbmm` / `c.baddbmm(a, b)`: a batched GEMM, then the scaled add."""
    if not (_is_scale(beta) and _is_scale(alpha)) or not is_f32(tracer, input, batch1, batch2):
        return NotImplemented
    if rank_of(tracer, batch1) != 3 or rank_of(tracer, batch2) != 3:
        return NotImplemented
    return _scaled_sum(torch.bmm(batch1, batch2), input, beta, alpha)


# What the capture tracer writes out, by function, by Tensor method name and by module type.
FUNCTION_DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    F.scaled_dot_product_attention: sdpa,
    torch.addmm: addmm,
    torch.baddbmm: baddbmm,
    **LOSS_FUNCTIONS,
    **STATS_FUNCTIONS,
    **LAYOUT_FUNCTIONS,
    **SHAPES_FUNCTIONS,
}
METHOD_DECOMPOSITIONS: dict[str, Callable[..., Any]] = {
    "addmm": addmm,
    "baddbmm": baddbmm,
    **LOSS_METHODS,
    **STATS_METHODS,
    **LAYOUT_METHODS,
}
MODULE_DECOMPOSITIONS: dict[type, Callable[..., Any]] = {
    nn.MultiheadAttention: multihead_attention,
    **LOSS_MODULES,
    **STATS_MODULES,
    **SHAPES_MODULES,
}
