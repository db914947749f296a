"""Code for a group-norm / instance-norm group (templates/groupnorm.cuh).

A group whose one output is the norm (through its epilogue) makes one launcher call: the one-pass
kernel where the slabs fit (launch knob `onepass`), else statistics then apply, the epilogue fused
into whichever writes. A group that also outputs the normalised value itself keeps the statistics +
finalize call (a per-(sample, channel) mean and scale) ahead of one elementwise kernel that applies
`bn_affine` and the epilogue and writes every output. A prologue (the chain before the norm, or a
conv's bias and epilogue) is applied on load by every pass, so its result is never written.
"""

from __future__ import annotations

from typing import Any

from codegen.emit.chain import ChainOp, Token, build_chain, spec_ops
from codegen.emit.functors import epi_functor
from codegen.emit.helper import Helper
from codegen.emit.kernels import GroupWriter, Load
from codegen.emit.row_io import functor_init, prefixed
from codegen.schedule.fusion import Group, group_norm_fused, group_norm_template

GN_MOMENTS_PARAMS: list[tuple[str, str]] = [
    ("const float*", "x"),
    ("const float*", "weight"),
    ("float*", "mean_out"),
    ("float*", "scale_out"),
    ("int64_t", "N"),
    ("int64_t", "C"),
    ("int64_t", "G"),
    ("int64_t", "seg"),
    ("float", "eps"),
]


def write_norm(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for a group-norm group; returns (template, launches)."""
    fused = group_norm_fused(group)
    writer.unit.use("groupnorm", *(() if fused else ("elementwise",)))
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    groups = "c" if args["groups"] is None else str(args["groups"])
    prologue = writer.prologue_ops(group, helper)  # applied by both passes
    load: Load | None = None
    if prologue:
        load = writer.prologue_load(group, helper, prologue)
        x = load.device
    else:
        helper.lines += [f"x = {helper.ref(args['input'])}.contiguous()", "p_shape = tuple(x.shape)"]
        x = "x"
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
    if fused:
        _fused_call(writer, group, helper, load, x)
    else:
        _moments_then_elementwise(writer, group, helper, load, x, prologue)
    return group_norm_template(group), 2 if fused else 3


def _fused_call(writer: GroupWriter, group: Group, helper: Helper, load: Load | None, x: str) -> None:
    """One launcher (stitch_gn_run): the one-pass kernel (a block per slab, the slab's head kept in shared
    memory) unless the knob `onepass` is 0 or the slabs are unfit (fewer than one per SM, tails too large
    for L2), else statistics and apply. It loads through the group's prologue (`load`) when there is one,
    else the input `x` itself, and writes the group's one output through its epilogue."""
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    epi_chain = build_chain(
        writer.classifier, spec_ops(group.epilogue), writer.shape(anchor.node), seed=anchor.node
    )
    result = group.epilogue[-1].node if group.epilogue else anchor.node
    epi = epi_functor(writer.unit, epi_chain, result, group.id)
    epi_fields = prefixed(epi_chain.fields(), "o_") if epi_chain.ops else []
    pro_fields = load.fields if load is not None else [("const float*", "x")]
    params = [*pro_fields, ("float*", "y"), ("const float*", "gamma"), ("const float*", "beta")]
    params += [("int64_t", "rows"), ("int64_t", "seg"), ("int64_t", "hw"), ("int64_t", "groups")]
    params += [("float", "eps"), *epi_fields, ("int", "onepass"), ("int", "threads")]
    body = "\n".join(
        [
            load.init if load is not None else "  const StitchInput pro{x};",
            functor_init(epi, "epi", epi_chain.fields(), "o_"),
            "  return stitch_gn_run(pro, epi, y, gamma, beta, rows, seg, hw, groups, eps, onepass, threads, result,"
            " stream);",
        ]
    )
    launcher = writer.unit.launcher("gn_norm", params, body, group.id, result="int64_t")
    helper.lines += [
        f"y1 = torch.empty(p_shape, device={x}.device, dtype=torch.float32)",
        f"beta_ptr = {helper.ref(args['bias'])}.contiguous().data_ptr()"
        if args.get("bias") is not None
        else "beta_ptr = 0",
        "hw = math.prod(p_shape[2:])",
    ]
    call = [*(load.args if load is not None else ["x.data_ptr()"]), "y1.data_ptr()", "gamma_ptr", "beta_ptr"]
    call += ["n * groups", "seg", "hw", "groups", repr(float(args["eps"]))]
    if epi_chain.ops:
        helper.lines.append("y1_shape = p_shape")
        helper.prepare_chain(epi_chain, "o_", "y1_shape", False)
        call += helper.chain_args(epi_chain, "o_")
    call += [helper.knob("onepass", 1), helper.knob("onepass.threads", 0), "stream"]
    helper.lines.append(f"_ext.{launcher}({', '.join(call)})")
    helper.returns = ["y1"]


def _moments_then_elementwise(
    writer: GroupWriter, group: Group, helper: Helper, load: Load | None, x: str, prologue: list[ChainOp]
) -> None:
    """The statistics + finalize call (through the group's own launcher when it has a prologue), then the
    elementwise kernel that normalises (`bn_affine`), applies the epilogue and writes every output."""
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    if load is not None:
        body = (
            f"{load.init}\n"
            "  return stitch_gn_moments_run(pro, weight, mean_out, scale_out, N, C, G, seg, eps, stream);"
        )
        moments = writer.unit.launcher("gn_moments", [*load.fields, *GN_MOMENTS_PARAMS[1:]], body, group.id)
        pointers = load.args
    else:
        writer.unit.library_launcher("gn_moments", GN_MOMENTS_PARAMS, group.id)
        moments, pointers = "gn_moments", ["x.data_ptr()"]
    ones = ", 1" * (len(writer.shape(anchor.node)) - 2)
    helper.lines += [
        f"mean = torch.empty(n, c, device={x}.device, dtype=torch.float32)",
        f"scale = torch.empty(n, c, device={x}.device, dtype=torch.float32)",
        f"_ext.{moments}({', '.join(pointers)}, gamma_ptr, mean.data_ptr(), scale.data_ptr(), n, c, groups, seg,"
        f" {float(args['eps'])!r}, stream)",
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
