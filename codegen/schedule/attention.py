"""What the plan says about an attention group: its template name and subtask text.

Why a module of its own: the group is one call of the fused kernel (templates/attention.cuh) with no
prologue or epilogue yet, and its description reads the product's sizes (frontend/attention_ops.py).
"""

from __future__ import annotations

from codegen.frontend.attention_ops import AttentionDims
from codegen.schedule.fusion import Group


def _dims(group: Group) -> AttentionDims:
    assert group.anchor is not None
    dims: AttentionDims = group.anchor.args["dims"]
    return dims


def _masked(group: Group) -> bool:
    assert group.anchor is not None
    return group.anchor.args.get("mask") is not None


def attention_template(group: Group) -> str:
    if _masked(group):
        return "fused_attention_masked"
    return "fused_attention_causal" if _dims(group).causal else "fused_attention"


def attention_describe(group: Group) -> tuple[str, str]:
    p = _dims(group)
    mask = "masked " if _masked(group) else "causal " if p.causal else ""
    title = f"{mask}attention B={p.batch} H={p.heads} Tq={p.tq} Tk={p.tk} D={p.d} Dv={p.dv}"
    detail = (
        "one launch of the fused fp32 attention kernel (online softmax, 64 query rows a block over 32-key "
        "tiles, causal tiles past the diagonal skipped): q, k, v read through their (b, h, t) strides, "
        "the scores never written; output (B, H, Tq, Dv) contiguous"
    )
    if _masked(group):
        detail += (
            "; the mask tensor is read per tile through its strides (0 where it broadcasts) and compared "
            "with its number, added, or read as bools in registers; key tiles a -inf fill removes for every "
            "row are skipped"
        )
    return title, detail
