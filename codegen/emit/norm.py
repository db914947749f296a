"""Code for a group-norm / instance-norm group: statistics kernels, then one fused elementwise pass.

templates/groupnorm.cuh sums each (sample, group) slab in double and turns the sums into a
per-(sample, channel) mean and scale (rstd x gamma); the normalisation `(x - mean) * scale + beta`
is the elementwise `bn_affine` op, so the group's epilogue fuses into that single pass. A group with
a prologue (the chain before it, or a conv's epilogue and bias) applies it on load in both passes,
so its result is never written. Where the slabs fit, one kernel does it all first (`_one_pass_first`).
"""

from __future__ import annotations

from typing import Any

from codegen.emit.chain import ChainOp, Token, build_chain, spec_ops
from codegen.emit.functors import epi_functor
from codegen.emit.helper import Helper
from codegen.emit.kernels import GroupWriter, Load
from codegen.emit.row_io import functor_init, prefixed
from codegen.schedule.fusion import Group

GN_STATS_PARAMS: list[tuple[str, str]] = [
    ("const float*", "x"),
    ("double*", "sum"),
    ("double*", "sumsq"),
    ("int64_t", "rows"),
    ("int64_t", "seg"),
]
GN_FINALIZE_PARAMS: list[tuple[str, str]] = [
    ("const double*", "sum"),
    ("const double*", "sumsq"),
    ("const float*", "weight"),
    ("float*", "mean_out"),
    ("float*", "scale_out"),
    ("int64_t", "N"),
    ("int64_t", "C"),
    ("int64_t", "G"),
    ("double", "count"),
    ("float", "eps"),
]


def write_norm(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for a group-norm group; returns (template, launches)."""
    writer.unit.use("groupnorm", "elementwise")
    writer.unit.library_launcher("gn_stats", GN_STATS_PARAMS, group.id)
    writer.unit.library_launcher("gn_finalize", GN_FINALIZE_PARAMS, group.id)
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    ones = ", 1" * (len(writer.shape(anchor.node)) - 2)
    groups = "c" if args["groups"] is None else str(args["groups"])
    prologue = writer.prologue_ops(group, helper)  # applied by both passes
    load: Load | None = None
    if prologue:
        stats, x, load = _prologue_stats(writer, group, helper, prologue)
    else:
        helper.lines += [f"x = {helper.ref(args['input'])}.contiguous()", "p_shape = tuple(x.shape)"]
        stats, x = "_ext.gn_stats(x.data_ptr(), ", "x"
    helper.lines += [
        "n, c = p_shape[0], p_shape[1]",
        f"groups = {groups}",
        "seg = math.prod(p_shape[1:]) // groups",
        f"stream = _stitch_stream({x})",
    ]
    if args.get("weight") is not None:
        helper.lines += [f"gamma = {helper.ref(args['weight'])}.contiguous()", "gamma_ptr = gamma.data_ptr()"]
    else:
        helper.lines.append("gamma_ptr = 0")
    three_kernels_from = len(helper.lines)
    helper.lines += [
        f"sums = torch.zeros(2, n * groups, device={x}.device, dtype=torch.float64)",
        f"mean = torch.empty(n, c, device={x}.device, dtype=torch.float32)",
        f"scale = torch.empty(n, c, device={x}.device, dtype=torch.float32)",
        f"{stats}sums[0].data_ptr(), sums[1].data_ptr(), n * groups, seg, stream)",
        "_ext.gn_finalize(sums[0].data_ptr(), sums[1].data_ptr(), gamma_ptr, mean.data_ptr(), scale.data_ptr(),"
        f" n, c, groups, float(seg), {float(args['eps'])!r}, stream)",
        f"mean_c, scale_c = mean.view(n, c{ones}), scale.view(n, c{ones})",
    ]
    mean_t, scale_t, beta_t = Token("mean_c", False), Token("scale_c", False), Token("beta_c", False)
    helper.locals.update({mean_t: "mean_c", scale_t: "scale_c", beta_t: "beta_c"})
    operands: list[Any] = [args["input"], mean_t, scale_t]
    if args.get("bias") is not None:
        helper.lines.append(f"beta_c = {helper.ref(args['bias'])}.view(-1{ones})")
        operands.append(beta_t)
    ops = [*prologue, ChainOp("bn_affine", operands, {}, anchor.node)] + spec_ops(group.epilogue)
    chain = build_chain(writer.classifier, ops, writer.shape(anchor.node))
    if not prologue:
        helper.locals[args["input"]] = "x"
    helper.returns = writer._ew_call(helper, chain, group.outputs, group, "e_", None)
    template = "gn_stats+ew" + ("_prologue" if prologue else "") + ("_epilogue" if group.epilogue else "")
    result = group.epilogue[-1].node if group.epilogue else anchor.node
    if list(group.outputs) == [result]:
        _one_pass_first(writer, group, helper, _taken(helper, three_kernels_from), load, x, result)
    return template, 3


def _taken(helper: Helper, mark: int) -> list[str]:
    """The lines emitted into `helper` since `mark`, taken out of it (to be placed under a branch)."""
    lines = helper.lines[mark:]
    del helper.lines[mark:]
    return lines


def _one_pass_first(
    writer: GroupWriter,
    group: Group,
    helper: Helper,
    three_kernels: list[str],
    load: Load | None,
    x: str,
    result: Any,
) -> None:
    """Emit the one-pass kernel (templates/groupnorm.cuh: a block per slab, the slab's head kept in shared
    memory) ahead of the statistics + elementwise path, which runs when the launch knob `onepass` is 0
    or the launcher finds the slabs unfit (fewer than one per SM, tails too large for L2). It loads
    through the group's prologue (`load`) when there is one, else the input `x` itself; `result` is the
    group's one output (the epilogue's last node, or the norm)."""
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    epi_chain = build_chain(
        writer.classifier, spec_ops(group.epilogue), writer.shape(anchor.node), seed=anchor.node
    )
    epi = epi_functor(writer.unit, epi_chain, result, group.id)
    epi_fields = prefixed(epi_chain.fields(), "o_") if epi_chain.ops else []
    pro_fields = load.fields if load is not None else [("const float*", "x")]
    params = [*pro_fields, ("float*", "y"), ("const float*", "gamma"), ("const float*", "beta")]
    params += [("int64_t", "rows"), ("int64_t", "seg"), ("int64_t", "hw"), ("int64_t", "groups")]
    params += [("float", "eps"), *epi_fields, ("int", "threads")]
    body = "\n".join(
        [
            load.init if load is not None else "  const StitchInput pro{x};",
            functor_init(epi, "epi", epi_chain.fields(), "o_"),
            "  return stitch_gn_onepass_run(pro, epi, y, gamma, beta, rows, seg, hw, groups, eps, threads, result,"
            " stream);",
        ]
    )
    launcher = writer.unit.launcher("gn_onepass", params, body, group.id, result="int64_t")
    out = helper.returns[0]
    lines = [
        f"y1 = torch.empty(p_shape, device={x}.device, dtype=torch.float32)",
        f"beta_ptr = {helper.ref(args['bias'])}.contiguous().data_ptr()"
        if args.get("bias") is not None
        else "beta_ptr = 0",
        "hw = math.prod(p_shape[2:])",
    ]
    call = [*(load.args if load is not None else ["x.data_ptr()"]), "y1.data_ptr()", "gamma_ptr", "beta_ptr"]
    call += ["n * groups", "seg", "hw", "groups"]
    call.append(repr(float(args["eps"])))
    if epi_chain.ops:
        lines.append("y1_shape = p_shape")
        mark = len(helper.lines)
        helper.prepare_chain(epi_chain, "o_", "y1_shape", False)
        lines += _taken(helper, mark)
        call += helper.chain_args(epi_chain, "o_")
    call += [helper.knob("onepass.threads", 0), "stream"]
    lines.append(f"{out} = y1 if _ext.{launcher}({', '.join(call)}) else None")
    helper.lines += [f"{out} = None", f"if {helper.knob('onepass', 1)}:"]
    helper.lines += ["    " + line for line in lines]
    helper.lines.append(f"if {out} is None:")
    helper.lines += ["    " + line.replace("\n", "\n    ") for line in three_kernels]


def _prologue_stats(
    writer: GroupWriter, group: Group, helper: Helper, prologue: list[ChainOp]
) -> tuple[str, str, Load]:
    """A statistics launcher of this group's own that loads through its prologue. Returns the start
    of its call (the prologue's operands; the sums and sizes follow), a tensor on the input's device
    and the prologue's load; sets `p_shape`."""
    load = writer.prologue_load(group, helper, prologue)
    body = f"{load.init}\n  return stitch_gn_stats_run(pro, sum, sumsq, rows, seg, stream);"
    launcher = writer.unit.launcher("gn_stats", [*load.fields, *GN_STATS_PARAMS[1:]], body, group.id)
    return f"_ext.{launcher}({', '.join(load.args)}, ", load.device, load
