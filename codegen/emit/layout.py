"""Code for a copy group: one launch of templates/layout.cuh with the elementwise epilogue fused.

- cat / stack: the parts (made contiguous, a no-op for the usual producer outputs) are viewed as
  [outer, size_p, inner] blocks around the joined dim; one launch writes each into its slice;
- contiguous / clone / tril / triu: a strided gather that reads the input through its own sizes and
  strides, so a permuted or sliced view is copied in one pass; a reshape that PyTorch could only
  make with a copy is the same gather, written into the new shape. `contiguous()` of a tensor that is
  already contiguous returns that tensor, as PyTorch does (no copy, nothing can observe the alias
  that the reference would not have made too); `clone()` always copies;
- pad (constant) / roll: the window kernel reads each output element at its coordinates moved per
  dim, a padding element reads the pad value, a roll wraps around; a roll and a pad composed into
  one window (`roll_pad`, `pad_roll`) do both in the same pass;
- zeros_like / ones_like / full_like: a fill of the input's shape.
"""

from __future__ import annotations

import torch.fx as fx

from codegen.emit.chain import ChainOp, CodegenError
from codegen.emit.kernels import GroupWriter, Helper, build_chain, epi_functor, spec_ops
from codegen.emit.row_io import functor_init, prefixed
from codegen.frontend.layout_ops import MAX_DIMS, PARTS_PER_LAUNCH
from codegen.frontend.ops import OpSpec
from codegen.schedule.fusion import Group

_GATHER_MODES = {"contiguous": 0, "clone": 0, "tril": 1, "triu": 2}
_UNTUNED = ("fill", "nll_pick")  # small launches with fixed configurations; the rest take the knobs
_CFG = "StitchLaunch{threads, per_sm}"  # the launch knobs, as the tuned launchers pass them on
_WINDOW_MODES = {"pad": 3, "roll": 4, "roll_pad": 5, "pad_roll": 6}  # templates/layout.cuh


def write_copy(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for a copy group; returns (template, launches)."""
    anchor = group.anchor
    assert anchor is not None
    result = group.epilogue[-1].node if group.epilogue else anchor.node
    launches = copy_launches(writer, group, helper, anchor, spec_ops(group.epilogue), result)
    helper.returns = ["y" for _ in group.outputs]
    return f"copy_{anchor.args['mode']}" + ("+epilogue" if group.epilogue else ""), launches


def copy_launches(
    writer: GroupWriter,
    group: Group,
    helper: Helper,
    copy: OpSpec,
    ops: list[ChainOp],
    result: fx.Node,
    scope: str = "",
) -> int:
    """The launches of one copy op with `ops` applied to every value it stores (its epilogue, whose
    last op computes `result`); the helper's `y` holds the output. Returns the launch count.
    `scope` prefixes the launch knobs' names when the helper has another launch with its own."""
    writer.unit.use("layout")
    args = copy.args
    mode = args["mode"]
    epi_chain = build_chain(writer.classifier, ops, writer.shape(copy.node), seed=copy.node)
    epi = epi_functor(writer.unit, epi_chain, result, group.id)
    epi_fields = prefixed(epi_chain.fields(), "e_") if epi_chain.ops else []
    epi_init = functor_init(epi, "epi", epi_chain.fields(), "e_")
    if mode in ("cat", "stack"):
        pieces = _concat(helper, args, epi, epi_init)
    elif mode in _WINDOW_MODES:
        pieces = [_window(helper, args, epi, epi_init)]
    elif mode == "nll_pick":
        if ops:
            raise CodegenError("nll_pick takes no epilogue")
        pieces = [_nll_pick(helper, args)]
    elif mode == "fill":
        helper.lines += [
            f"x = {helper.ref(args['input'])}",
            "y = torch.empty(tuple(x.shape), device=x.device, dtype=torch.float32)",
        ]
        params = [("float*", "y"), ("int64_t", "n"), ("float", "value")]
        body = f"{epi_init}\n  return stitch_fill_run<{epi}>(y, n, value, epi, stream);"
        pieces = [(params, body, ["y.data_ptr()", "y.numel()", repr(float(args["value"]))])]
    else:
        pieces = [_gather(helper, args, epi, epi_init, alias=not ops)]
    epi_args: list[str] = []
    if epi_chain.ops:
        helper.lines.append("y_shape = tuple(y.shape)")
        helper.prepare_chain(epi_chain, "e_", "y_shape", False)
        epi_args = helper.chain_args(epi_chain, "e_")
    knobs: list[tuple[str, str]] = []
    knob_args: list[str] = []
    if mode not in _UNTUNED:
        knobs = [("int", "threads"), ("int", "per_sm")]
        knob_args = [helper.knob(f"{scope}threads", 256), helper.knob(f"{scope}per_sm", 0)]
    for params, body, call in pieces:
        launcher = writer.unit.launcher(mode, params + epi_fields + knobs, body, group.id)
        launch = f"_ext.{launcher}({', '.join(call + epi_args + knob_args + ['_stitch_stream(y)'])})"
        if mode == "contiguous" and not ops:
            helper.lines += ["if not x.is_contiguous():", f"    {launch}"]
        else:
            helper.lines.append(launch)
    return len(pieces)


Piece = tuple[list[tuple[str, str]], str, list[str]]  # launcher parameters, body, call arguments


def _concat(helper: Helper, args: dict, epi: str, epi_init: str) -> list[Piece]:
    """One launch per PARTS_PER_LAUNCH parts (one for every concatenation of up to that many)."""
    parts = args["inputs"]
    n, dim, stack = len(parts), int(args["dim"]), args["mode"] == "stack"
    names = [f"x{i}" for i in range(n)]
    helper.lines += [
        f"{name} = {helper.ref(ref)}.contiguous()" for name, ref in zip(names, parts, strict=True)
    ]
    if stack:
        helper.lines += [
            f"shape = list(x0.shape[:{dim}]) + [{n}] + list(x0.shape[{dim}:])",
            *(f"_stitch_same_shape({name}, tuple(x0.shape))" for name in names[1:]),
        ]
        sizes = ["1"] * n
    else:
        helper.lines += [
            "shape = list(x0.shape)",
            f"shape[{dim}] = sum(t.shape[{dim}] for t in ({', '.join(names)},))",
        ]
        sizes = [f"{name}.shape[{dim}]" for name in names]
    helper.lines += [
        "y = torch.empty(shape, device=x0.device, dtype=torch.float32)",
        f"outer, total, inner = math.prod(shape[:{dim}]), shape[{dim}], math.prod(shape[{dim} + 1:])",
    ]
    pieces: list[Piece] = []
    for first in range(0, n, PARTS_PER_LAUNCH):
        chunk = list(range(first, min(n, first + PARTS_PER_LAUNCH)))
        k = len(chunk)
        params = [("const float*", f"x{i}") for i in range(k)] + [("int64_t", f"n{i}") for i in range(k)]
        params += [("int64_t", "first"), ("float*", "y"), ("int64_t", "outer"), ("int64_t", "total")]
        params += [("int64_t", "inner")]
        fill = [f"  StitchConcatParts<{k}> p;", "  p.start[0] = first;"]
        fill += [f"  p.ptr[{i}] = x{i};\n  p.start[{i + 1}] = p.start[{i}] + n{i};" for i in range(k)]
        body = "\n".join(
            [
                epi_init,
                *fill,
                f"  return stitch_concat_run<{k}, {epi}>(p, y, outer, total, inner, epi, {_CFG}, stream);",
            ]
        )
        offset = str(first) if stack or not first else " + ".join(sizes[:first])
        call = [f"{names[i]}.data_ptr()" for i in chunk] + [sizes[i] for i in chunk]
        call += [offset, "y.data_ptr()", "outer", "total", "inner"]
        pieces.append((params, body, call))
    return pieces


def _nll_pick(helper: Helper, args: dict) -> Piece:
    """Cross entropy's pick: x at each sample's target class and the sample's weight, [2, *t.shape]."""
    dim = int(args["dim"])
    helper.lines += [
        f"x = {helper.ref(args['input'])}.contiguous()",
        f"t = {helper.ref(args['target'])}.contiguous()",
        f"if tuple(t.shape) != tuple(x.shape[:{dim}]) + tuple(x.shape[{dim} + 1:]):",
        "    raise ValueError(f'targets of shape {tuple(t.shape)} for scores of shape {tuple(x.shape)}')",
        "y = torch.empty((2, *t.shape), device=x.device, dtype=torch.float32)",
    ]
    params = [("const float*", "x"), ("const int64_t*", "t"), ("float*", "y"), ("int64_t", "n")]
    params += [("int64_t", "classes"), ("int64_t", "inner"), ("int64_t", "ignore")]
    body = "  return stitch_nll_pick_run(x, t, y, n, classes, inner, ignore, stream);"
    call = ["x.data_ptr()", "t.data_ptr()", "y.data_ptr()", "t.numel()", f"x.shape[{dim}]"]
    call += [f"math.prod(x.shape[{dim} + 1:])", str(int(args["ignore"]))]
    return params, body, call


def _window(helper: Helper, args: dict, epi: str, epi_init: str) -> Piece:
    """A pad, a roll or one of each (frontend/layout_ops.py): the output's sizes (the input's plus
    the pads), the input's own sizes and strides, each dim's move `lo` and a composed roll's
    `shift`; one pass, padding elements read `value`."""
    lo, hi = [int(v) for v in args["lo"]], [int(v) for v in args["hi"]]
    padded = args["mode"] != "roll"
    extra = [a + b for a, b in zip(lo, hi, strict=True)] if padded else [0] * len(lo)
    shift = [int(v) for v in args.get("shift", [0] * len(lo))]
    helper.lines += [
        f"x = {helper.ref(args['input'])}",
        f"shape = [size + extra for size, extra in zip(x.shape, {extra!r})]",
        "y = torch.empty(shape, device=x.device, dtype=torch.float32)",
        f"sizes = shape + [1] * ({MAX_DIMS} - x.dim())",
        f"in_sizes = list(x.shape) + [1] * ({MAX_DIMS} - x.dim())",
        f"strides = list(x.stride()) + [0] * ({MAX_DIMS} - x.dim())",
    ]
    lo8, shift8 = (v + [0] * (MAX_DIMS - len(v)) for v in (lo, shift))
    params = [("const float*", "x"), ("float*", "y"), ("int", "nd")]
    params += [("int64_t", f"size{d}") for d in range(MAX_DIMS)]
    params += [("int64_t", f"insize{d}") for d in range(MAX_DIMS)]
    params += [("int64_t", f"stride{d}") for d in range(MAX_DIMS)]
    params += [("int64_t", "n"), ("float", "fill")]
    join = ", ".join
    body = "\n".join(
        [
            epi_init,
            f"  const StitchStrides s{{nd, {{{join(f'size{d}' for d in range(MAX_DIMS))}}}, "
            f"{{{join(f'stride{d}' for d in range(MAX_DIMS))}}}}};",
            f"  const StitchWindow w{{{{{join(str(v) for v in lo8)}}}, "
            f"{{{join(f'insize{d}' for d in range(MAX_DIMS))}}}, {{{join(str(v) for v in shift8)}}}}};",
            f"  return stitch_window_run<{_WINDOW_MODES[args['mode']]}, {epi}>(x, y, s, w, n, fill, epi, {_CFG}, stream);",
        ]
    )
    call = ["x.data_ptr()", "y.data_ptr()", "x.dim()"]
    call += [f"sizes[{d}]" for d in range(MAX_DIMS)] + [f"in_sizes[{d}]" for d in range(MAX_DIMS)]
    call += [f"strides[{d}]" for d in range(MAX_DIMS)] + ["y.numel()", repr(float(args["value"]))]
    return params, body, call


def _gather(helper: Helper, args: dict, epi: str, epi_init: str, alias: bool) -> Piece:
    """A strided gather of the input; a copying reshape (`args['shape']`) writes the gathered
    elements, in the input's row-major order, into a tensor of the new shape."""
    mode = args["mode"]
    shape = args.get("shape")
    out = repr(tuple(shape)) if shape is not None else "tuple(x.shape)"
    same = "x" if shape is None else f"x.view({out})"
    helper.lines += [
        f"x = {helper.ref(args['input'])}",
        f"y = {same} if x.is_contiguous() else torch.empty({out}, device=x.device, dtype=torch.float32)"
        if mode == "contiguous" and alias
        else f"y = torch.empty({out}, device=x.device, dtype=torch.float32)",
    ]
    if mode in ("contiguous", "clone"):  # merge dims contiguous with each other: fewer divisions
        helper.lines.append("dims = _stitch_dims(x)")
    else:  # a triangle mask reads rows and columns from the last two dims
        helper.lines.append("dims = list(zip(x.shape, x.stride()))")
    helper.lines += [
        f"sizes = [d[0] for d in dims] + [1] * ({MAX_DIMS} - len(dims))",
        f"strides = [d[1] for d in dims] + [0] * ({MAX_DIMS} - len(dims))",
    ]
    params = [("const float*", "x"), ("float*", "y"), ("int", "nd")]
    params += [("int64_t", f"size{d}") for d in range(MAX_DIMS)]
    params += [("int64_t", f"stride{d}") for d in range(MAX_DIMS)]
    params += [("int64_t", "n"), ("int64_t", "diag")]
    shape = ", ".join(f"size{d}" for d in range(MAX_DIMS))
    strides = ", ".join(f"stride{d}" for d in range(MAX_DIMS))
    body = "\n".join(
        [
            epi_init,
            f"  const StitchStrides s{{nd, {{{shape}}}, {{{strides}}}}};",
            f"  return stitch_gather_run<{_GATHER_MODES[mode]}, {epi}>(x, y, s, n, diag, epi, {_CFG}, stream);",
        ]
    )
    call = ["x.data_ptr()", "y.data_ptr()", "len(dims)"]
    call += [f"sizes[{d}]" for d in range(MAX_DIMS)] + [f"strides[{d}]" for d in range(MAX_DIMS)]
    call += ["y.numel()", str(int(args.get("diagonal", 0)))]
    return params, body, call
