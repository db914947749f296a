"""Code for an AXIS group: one launch of templates/axis.cuh with the prologue and epilogue fused.

The group is an argmax / argmin (or a `max/min(x, dim)` whose indices are used), a logsumexp, or a
softmax / log_softmax over a non-last dim (codegen/frontend/axis_ops.py), with the elementwise ops
feeding it applied on load and those after its float result applied on store. The helper views the
input as [outer, n, inner] around the dims, the layout the kernels index; indices come back as
int64 like PyTorch's.
"""

from __future__ import annotations

from typing import Any

from codegen.emit.kernels import GroupWriter, Helper
from codegen.schedule.fusion import Group

AXIS_OP_CODES = {"argmax": 0, "argmin": 1, "logsumexp": 2}
SOFTMAX_OPS = ("softmax", "log_softmax")


def write_axis(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for an AXIS group; returns (template, launches)."""
    writer.unit.use("axis")
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    d0, d1 = args["dims"][0], args["dims"][-1]
    io = writer.row_io(group, helper)
    helper.lines += [
        f"outer = math.prod(p_shape[:{d0}])",
        f"red = math.prod(p_shape[{d0}:{d1 + 1}])",
        f"inner = math.prod(p_shape[{d1 + 1}:])",
    ]
    saved = "saved" if group.save_prologue else None
    if saved:
        helper.lines.append(f"saved = {io.alloc.format('p_shape')}")
    stream_of = "y"
    if anchor.op in SOFTMAX_OPS:
        helper.lines.append(f"y = {io.alloc.format('p_shape')}")
        log = "true" if anchor.op == "log_softmax" else "false"
        run = f"stitch_axis_softmax_run<{log}, {io.pro}, {io.epi}>(pro, epi, saved, y, outer, red, inner, stream)"
        params = io.pro_fields + io.epi_fields + [("float*", "saved"), ("float*", "y")]
        tail = ["saved.data_ptr()" if saved else "0", "y.data_ptr()"]
        io.add_epilogue_args(helper, "p_shape")
        template = f"axis_{anchor.op}"
        names: dict[Any, str] = {}
    else:
        keep = repr((1,) * (d1 - d0 + 1)) if args["keepdim"] else "()"
        helper.lines.append(f"y_shape = p_shape[:{d0}] + {keep} + p_shape[{d1 + 1}:]")
        values, indices = args.get("values"), args.get("indices")
        tail = ["saved.data_ptr()" if saved else "0"]
        if values is not None:
            helper.lines.append(f"y = {io.alloc.format('y_shape')}")
            tail.append("y.data_ptr()")
        else:
            tail.append("0")
        if indices is not None:
            device = "p_f0" if io.pro_chain.full else "p_b0"
            helper.lines.append(f"idx = torch.empty(y_shape, device={device}.device, dtype=torch.int64)")
            tail.append("idx.data_ptr()")
            stream_of = "idx" if values is None else "y"
        else:
            tail.append("0")
        code = AXIS_OP_CODES[anchor.op]
        run = f"stitch_axis_reduce_run<{code}, {io.pro}, {io.epi}>(pro, epi, saved, y, idx, outer, red, inner, stream)"
        params = io.pro_fields + io.epi_fields + [("float*", "saved"), ("float*", "y"), ("int64_t*", "idx")]
        io.add_epilogue_args(helper, "y_shape")
        template = f"axis_{anchor.op}" + ("+values" if values is not None and indices is not None else "")
        names = {indices: "idx"} if indices is not None else {}
    params += [("int64_t", "outer"), ("int64_t", "red"), ("int64_t", "inner")]
    body = "\n".join([io.pro_init, io.epi_init, f"  return {run};"])
    launcher = writer.unit.launcher("axis", params, body, group.id)
    tail += ["outer", "red", "inner", f"_stitch_stream({stream_of})"]
    helper.lines.append(f"_ext.{launcher}({', '.join(io.call + tail)})")
    last = group.prologue[-1].node if group.prologue else None
    helper.returns = [names.get(node, saved if saved and node is last else "y") for node in group.outputs]
    if group.prologue:
        template += "+prologue"
    if group.epilogue:
        template += "+epilogue"
    return template, 1
