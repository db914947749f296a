"""Code for a scan group: one launch of templates/scan.cuh with the prologue and epilogue fused.

The group is a cumsum / cumprod with the elementwise ops feeding it (applied on load), the ops after
it (applied on store) and the flips / bool mask that frontend/scan_ops.py folded into it (the kernel
walks rows backwards and multiplies by the mask itself). The helper views the input as
[outer, n, inner] around the scanned dim, the layout the kernels index.
"""

from __future__ import annotations

from codegen.emit.helper import Helper
from codegen.emit.kernels import GroupWriter
from codegen.schedule.fusion import Group

SCAN_OP_CODES = {"cumsum": 0, "cumprod": 1}


def write_scan(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for a scan group; returns (template, launches)."""
    writer.unit.use("scan")
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    dim, reverse, mask = int(args["dim"]), bool(args["reverse"]), args.get("mask")
    io = writer.row_io(group, helper)
    helper.lines += [
        f"outer = math.prod(p_shape[:{dim}])",
        f"n = p_shape[{dim}]",
        f"inner = math.prod(p_shape[{dim + 1}:])",
        f"y = {io.alloc.format('p_shape')}",
    ]
    if mask is not None:
        helper.lines += [f"m = {helper.ref(mask)}.contiguous()", "_stitch_same_shape(m, p_shape)"]
    saved = "saved" if group.save_prologue else None
    if saved:
        helper.lines.append(f"saved = {io.alloc.format('p_shape')}")
    params = io.pro_fields + io.epi_fields + [("const bool*", "mask"), ("float*", "saved"), ("float*", "y")]
    params += [("int64_t", "outer"), ("int64_t", "n"), ("int64_t", "inner")]
    code, direction = SCAN_OP_CODES[anchor.op], "true" if reverse else "false"
    body = "\n".join(
        [
            io.pro_init,
            io.epi_init,
            f"  return stitch_scan_run<{code}, {direction}, {io.pro}, {io.epi}>"
            "(pro, epi, mask, saved, y, outer, n, inner, stream);",
        ]
    )
    io.add_epilogue_args(helper, "p_shape")
    launcher = writer.unit.launcher("scan", params, body, group.id)
    tail = ["m.data_ptr()" if mask is not None else "0", "saved.data_ptr()" if saved else "0", "y.data_ptr()"]
    tail += ["outer", "n", "inner", "_stitch_stream(y)"]
    helper.lines.append(f"_ext.{launcher}({', '.join(io.call + tail)})")
    helper.returns = io.returns(group, saved)
    template = "scan_reverse" if reverse else "scan"
    if mask is not None:
        template += "+mask"
    if group.prologue:
        template += "+prologue"
    if group.epilogue:
        template += "+epilogue"
    return template, 1
