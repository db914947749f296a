"""Code for a pool group: one launch of our pooling kernel (templates/pool.cuh), prologue and
epilogue fused.

The helper computes the output shape at run time (PyTorch's formulas, ceil mode included), the
launcher bakes the window constants in; the group's elementwise prologue (a chain before the pool,
or a conv's epilogue and bias: schedule/fusion.py) is applied on load, its epilogue on store.
"""

from __future__ import annotations

import math

from codegen.emit.chain import build_chain, spec_ops
from codegen.emit.functors import epi_functor
from codegen.emit.helper import Helper
from codegen.emit.kernels import GroupWriter
from codegen.emit.row_io import functor_init, prefixed
from codegen.frontend.pool_ops import PoolParams
from codegen.schedule.fusion import Group, pool_template

_MODES = {"max": 0, "avg": 1, "adaptive_avg": 2, "adaptive_max": 3}
UNROLLED_WINDOW = 64  # fixed windows of at most this many taps are compile-time constants (unrolled)
ROWVEC_MAX_STEP = 4  # widths' strides and dilations up to this are baked in for four outputs a thread


def _padded3(values: tuple[int, ...], fill: int) -> list[int]:
    return [fill] * (3 - len(values)) + list(values)


def write_pool(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for a pool group; returns (template, launches)."""
    writer.unit.use("pool")
    anchor = group.anchor
    assert anchor is not None
    params: PoolParams = anchor.args["params"]
    nd = params.nd
    source = anchor.args["input"]
    if group.prologue:  # the input is the prologue's result, computed on load, never stored
        load = writer.prologue_load(group, helper)
        pro, pro_fields, pro_init, pro_args, device = (
            load.struct,
            load.fields,
            load.init,
            load.args,
            load.device,
        )
    else:
        helper.lines.append(f"x = {helper.ref(source)}.contiguous()")
        helper.lines.append("p_shape = tuple(x.shape)")
        pro, pro_fields = "StitchInput", [("const float*", "x")]
        pro_init, pro_args, device = "  const StitchInput pro{x};", ["x.data_ptr()"], "x"
    helper.lines.append(f"lead, sizes = p_shape[:-{nd}], p_shape[-{nd}:]")
    outs = []
    for i in range(nd):
        if params.adaptive:
            size = params.output_size[i]
            outs.append(f"sizes[{i}]" if size is None else str(size))
        else:
            k, st, p, d = params.kernel[i], params.stride[i], params.padding[i], params.dilation[i]
            extra = 2 * p - d * (k - 1) - 1 + (st - 1 if params.ceil_mode else 0)
            helper.lines.append(f"o{i} = (sizes[{i}] + {extra}) // {st} + 1")
            if params.ceil_mode:  # a window may not start in the right padding (PyTorch's rule)
                helper.lines.append(f"o{i} -= 1 if (o{i} - 1) * {st} >= sizes[{i}] + {p} else 0")
            outs.append(f"o{i}")
    helper.lines += [
        f"out_sizes = ({', '.join(outs)},)",
        f"y = torch.empty(tuple(lead) + out_sizes, device={device}.device, dtype=torch.float32)",
        "planes = math.prod(lead)",
        "i3 = (1,) * (3 - len(sizes)) + tuple(sizes)",
        "o3 = (1,) * (3 - len(out_sizes)) + tuple(out_sizes)",
    ]
    value_node = anchor.node
    epi_chain = build_chain(
        writer.classifier, spec_ops(group.epilogue), writer.shape(value_node), seed=value_node
    )
    epi_result = group.epilogue[-1].node if group.epilogue else value_node
    epi = epi_functor(writer.unit, epi_chain, epi_result, group.id)
    window = _padded3(params.kernel, 1) + _padded3(params.stride, 1) + _padded3(params.padding, 0)
    window += _padded3(params.dilation, 1)
    if params.adaptive:
        window = [1] * 12
    consts = ", ".join(str(v) for v in window)
    # A window small enough to unroll becomes template arguments (templates/pool.cuh says why).
    kernel3 = _padded3(params.kernel, 1)
    baked = kernel3 if not params.adaptive and math.prod(kernel3) <= UNROLLED_WINDOW else [0, 0, 0]
    # the width's stride and dilation too, for the four-outputs-a-thread kernel (the knob `outs`)
    row = baked[2] > 0 and params.stride[-1] <= ROWVEC_MAX_STEP and params.dilation[-1] <= ROWVEC_MAX_STEP
    baked += [params.stride[-1], params.dilation[-1]] if row else [0, 0]
    shape_init = (
        f"  const StitchPoolShape s{{planes, id, ih, iw, od, oh, ow, {consts}, "
        f"{1 if params.count_include_pad else 0}, {params.divisor}}};"
    )
    dims = [("int64_t", n) for n in ("planes", "id", "ih", "iw", "od", "oh", "ow")]
    epi_fields = prefixed(epi_chain.fields(), "e_") if epi_chain.ops else []
    launch_params = [*pro_fields, ("float*", "y"), *dims, *epi_fields]
    launch_params += [("int", "threads"), ("int", "per_sm"), ("int", "outs")]
    body = "\n".join(
        [
            pro_init,
            functor_init(epi, "epi", epi_chain.fields(), "e_"),
            shape_init,
            f"  return stitch_pool_run<{_MODES[params.kind]}, {', '.join(map(str, baked))}, {pro}, {epi}>"
            "(pro, y, s, epi, StitchLaunch{threads, per_sm}, outs, stream);",
        ]
    )
    launcher = writer.unit.launcher("pool", launch_params, body, group.id)
    call = [*pro_args, "y.data_ptr()", "planes", "i3[0]", "i3[1]", "i3[2]", "o3[0]", "o3[1]", "o3[2]"]
    if epi_chain.ops:
        helper.lines.append("y_shape = tuple(y.shape)")
        helper.prepare_chain(epi_chain, "e_", "y_shape", False)
        call += helper.chain_args(epi_chain, "e_")
    call += [helper.knob("threads", 256), helper.knob("per_sm", 0), helper.knob("outs", 1) if row else "1"]
    helper.lines.append(f"_ext.{launcher}({', '.join(call + ['_stitch_stream(y)'])})")
    helper.returns = ["y" for _ in group.outputs]
    return pool_template(group), 1
