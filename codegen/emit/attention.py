"""Code for an attention group: one call of the fused kernel (templates/attention.cuh).

The helper passes q, k and v as they come (typically head-split views of one projection: their
(b, h, t) strides go to the kernel, no copy unless a last dim is strided), allocates the output
(B, H, Tq, Dv) contiguous (or, when the only reader is the head merge's transpose(1, 2), as a
(B, T, H, Dv) tensor seen through that transpose, so the merge copies nothing) and calls
`stitch_attention_masked` on the current stream through a launcher that hands its return code to Python, which raises on any nonzero code with the operands' sizes.
801 (cudaErrorNotSupported: head dims past 128, no keys) cannot come from a planned group: the
capture routes only what the kernel takes and the program checks its input shapes. There is no torch
fallback in the helper on purpose: carrying `_stitch_attention_math` in every program would make the
static check (tools/checks) count its matmuls as PyTorch fallbacks of a path that never runs; a
demoted group calls it as a reference statement instead. Rank-3 operands (BH, T, D) are one head
each (H = 1, head stride 0). A tensor mask (attention_chain.py) is passed as a view expanded to the
scores' shape: its broadcast dims get stride 0 and nothing is copied.
"""

from __future__ import annotations

from codegen.emit.helper import Helper
from codegen.emit.kernels import GroupWriter
from codegen.emit.torch_calls import float_literal
from codegen.frontend.attention_ops import MASK_MODES, AttentionDims
from codegen.schedule.attention import attention_template
from codegen.schedule.fusion import Group

_OPERANDS = ("q", "k", "v", "o")
ATTENTION_PARAMS: list[tuple[str, str]] = [
    ("const float*", "q"),
    ("const float*", "k"),
    ("const float*", "v"),
    ("float*", "o"),
    *[("int64_t", name) for name in ("B", "H", "Tq", "Tk", "D", "Dv")],
    *[("int64_t", f"{t}_s{d}") for t in _OPERANDS for d in "bht"],
    ("float", "scale"),
    ("int", "causal"),
    ("const void*", "mask"),
    *[("int64_t", f"m_s{d}") for d in "bhij"],
    ("int", "compare"),
    ("float", "rhs"),
    ("float", "fill"),
]


def write_attention(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for an attention group; returns (template, launches)."""
    writer.unit.use("attention")
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    p: AttentionDims = args["dims"]
    names = ", ".join(name for _, name in ATTENTION_PARAMS)
    body = f"  *result = stitch_attention_masked({names}, stream);\n  return 0;"
    launcher = writer.unit.launcher("attention", ATTENTION_PARAMS, body, group.id, result="int")
    q, k, v = (helper.ref(args[name]) for name in ("q", "k", "v"))
    scale, causal = repr(float(args["scale"])), bool(args["causal"])
    if p.rank == 4:
        sizes = ["B, H, Tq, D = q.shape", "Tk, Dv = k.shape[2], v.shape[3]"]
        strides = "st = [s for t in (q, k, v, o) for s in t.stride()[:3]]"
        out, scores, merged = "(B, H, Tq, Dv)", "B, H, Tq, Tk", ""
        if args["merge_heads"]:  # (B, T, H, Dv) memory: the reader's transpose(1, 2) is contiguous
            out, merged = "(B, Tq, H, Dv)", ".transpose(1, 2)"
    else:
        sizes = ["B, Tq, D = q.shape", "H, Tk, Dv = 1, k.shape[1], v.shape[2]"]
        strides = "st = [s for t in (q, k, v, o) for s in (t.stride(0), 0, t.stride(1))]"
        out, scores, merged = "(B, Tq, Dv)", "B, Tq, Tk", ""
    if args["mask"] is None:
        mask_lines, mask_args = [], "0, 0, 0, 0, 0, 0, 0.0, 0.0"
    else:
        tensor, compare, rhs, fill = args["mask"]
        ms = "m.stride()" if p.rank == 4 else "(m.stride(0), 0, m.stride(1), m.stride(2))"
        mask_lines = [f"m = {helper.ref(tensor)}.expand({scores})  # a view: broadcast dims read at stride 0"]
        mask_args = f"m.data_ptr(), *{ms}, {MASK_MODES[compare]}, {float_literal(rhs)}, {float_literal(fill)}"
    helper.lines += [
        f"q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in ({q}, {k}, {v}))",
        *sizes,
        f"o = torch.empty({out}, device=q.device, dtype=torch.float32){merged}",
        strides,
        *mask_lines,
        f"code = _ext.{launcher}(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), B, H, Tq, Tk, D, Dv,"
        f" *st, {scale}, {int(causal)}, {mask_args}, _stitch_stream(q))",
        "if code != 0:  # 801: head dims with no instantiation (the capture routes none), nothing launched",
        "    raise RuntimeError(f'stitch_attention returned CUDA error {code}"
        " for q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}')",
    ]
    helper.returns = ["o"]
    return attention_template(group), 1
