"""Classify the ops that only move data: concatenation, stacking, copies, triangle masks, fills.

Why a module of its own: `torch.cat`/`torch.stack` along any dim, `x.contiguous()`, `x.clone()`,
`torch.tril`/`torch.triu`, `F.pad` (constant), `torch.roll` and `zeros_like`/`ones_like`/`full_like`
all become one family (COPY) whose kernels (templates/layout.cuh) address their inputs directly: a
concatenation is one launch that writes every input into its slice of the output, a contiguous copy
of a permuted view (ShuffleNet's channel shuffle) is one strided gather, a pad or a roll one pass
that reads each output element's moved coordinates. Each kernel stores through a fused elementwise epilogue.
What the kernels do not produce stays PyTorch with a reason (other dtypes, memory formats, more
parts than one launch takes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx
import torch.nn.functional as F

from codegen.emit.runtime import _stitch_nll_pick

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

COPY = "copy"  # the family of data-movement kernels (templates/layout.cuh)
FILL_OPS = frozenset({"zeros_like", "ones_like", "full_like"})
WINDOW_OPS = frozenset({"pad", "roll"})
COPY_OPS = (
    frozenset({"cat", "stack", "contiguous", "clone", "tril", "triu", "nll_pick"}) | FILL_OPS | WINDOW_OPS
)
COPY_FUNCTIONS: list[tuple[str, list[Any]]] = [
    ("nll_pick", [_stitch_nll_pick]),  # cross entropy's pick (decompose_losses.py)
    ("pad", [F.pad, getattr(torch._C._nn, "pad", F.pad)]),
    ("roll", [torch.roll]),
    ("stack", [torch.stack]),
    ("clone", [torch.clone]),
    ("tril", [torch.tril]),
    ("triu", [torch.triu]),
    ("zeros_like", [torch.zeros_like]),
    ("ones_like", [torch.ones_like]),
    ("full_like", [torch.full_like]),
]
PARTS_PER_LAUNCH = 64  # inputs of one concatenation launch (the launcher takes a pointer per input)
MAX_PARTS = 1024  # a longer concatenation stays PyTorch (its launchers would bloat the program)
MAX_DIMS = 8  # dims of a strided gather (StitchStrides in templates/layout.cuh)
_FORMATS_OK = {
    "contiguous": (None, torch.contiguous_format),
    "clone": (None, torch.contiguous_format, torch.preserve_format),
}


def _arg(node: fx.Node, index: int, name: str, default: Any = None) -> Any:
    """Positional `index` (after the input for methods and functions alike) or keyword `name`."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _input(node: fx.Node) -> Any:
    return node.args[0] if node.args else node.kwargs.get("input", node.kwargs.get("self"))


def _is_f32(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.float32


def classify_copy(classifier: Classifier, spec: OpSpec) -> None:
    """Fill `spec` (family COPY, args) or reject it with the reason it stays PyTorch."""
    node, op = spec.node, spec.op
    if node.op == "call_module":
        classifier.reject(spec, f"{op} as a module")
        return
    if not _is_f32(classifier.value(node)):
        classifier.reject(spec, f"{op} with a non-float32 result")
        return
    if op in ("cat", "stack"):
        _concat(classifier, spec)
        return
    if op in WINDOW_OPS:
        _window(classifier, spec)
        return
    if op == "nll_pick":
        _nll_pick(classifier, spec)
        return
    x = _input(node)
    value = classifier.value(x)
    if not _is_f32(value):
        classifier.reject(spec, f"{op} of a non-float32 tensor")
        return
    if op in FILL_OPS:
        _fill(classifier, spec, x)
        return
    if value.dim() > MAX_DIMS:
        classifier.reject(spec, f"{op} of a tensor of more than {MAX_DIMS} dims")
        return
    if op in _FORMATS_OK:
        extra = [k for k in node.kwargs if k not in ("input", "self", "memory_format")]
        if extra or len(node.args) > 1 or node.kwargs.get("memory_format") not in _FORMATS_OK[op]:
            classifier.reject(spec, f"{op} with a memory format or arguments the copy kernel does not take")
            return
        spec.args = {"input": x, "mode": op}
    else:  # tril / triu
        diagonal = _arg(node, 1, "diagonal", 0)
        if not isinstance(diagonal, int) or isinstance(diagonal, bool):
            classifier.reject(spec, f"{op} with a non-constant diagonal")
            return
        if value.dim() < 2:
            classifier.reject(spec, f"{op} of a tensor of fewer than 2 dims")
            return
        spec.args = {"input": x, "mode": op, "diagonal": diagonal}
    spec.family = COPY


def _concat(classifier: Classifier, spec: OpSpec) -> None:
    node, op = spec.node, spec.op
    parts = _input(node)
    dim = _arg(node, 1, "dim", 0)
    extra = [k for k in node.kwargs if k not in ("tensors", "dim", "axis")]
    if not isinstance(parts, (list, tuple)) and "tensors" in node.kwargs:
        parts = node.kwargs["tensors"]
    dim = node.kwargs.get("axis", dim)
    if extra or not isinstance(parts, (list, tuple)) or not parts:
        classifier.reject(spec, f"{op} of something other than a list of tensors")
        return
    values = [classifier.value(p) for p in parts]
    if not all(isinstance(p, fx.Node) and _is_f32(v) for p, v in zip(parts, values, strict=True)):
        classifier.reject(spec, f"{op} of non-float32 tensors")
        return
    if len(parts) > MAX_PARTS:
        classifier.reject(spec, f"{op} of more than {MAX_PARTS} tensors")
        return
    if not isinstance(dim, int) or isinstance(dim, bool):
        classifier.reject(spec, f"{op} over a non-constant dim")
        return
    ndim = values[0].dim()
    if ndim == 0 and op == "cat" or any(v.dim() != ndim for v in values):
        classifier.reject(spec, f"{op} of tensors of different ranks (or 0-d)")
        return
    out_ndim = ndim + (1 if op == "stack" else 0)
    spec.family = COPY
    spec.args = {"inputs": list(parts), "dim": dim % out_ndim, "mode": op}


def _ints(value: Any) -> list[int] | None:
    """An int or a list/tuple of ints as a list; None for anything else (a traced size, a float)."""
    items = [value] if isinstance(value, int) else value
    if not isinstance(items, (list, tuple)) or not all(type(v) is int for v in items):
        return None
    return list(items)


def _window(classifier: Classifier, spec: OpSpec) -> None:
    """`F.pad(x, pad, 'constant', v)` and `torch.roll(x, shifts, dims)`: the window kernel reads each
    output element's input coordinates moved by `lo` per dim (args['lo']), padding with `value`
    outside the input or wrapping around (roll). A pad or roll whose input is another one read by
    nothing else becomes one pass over the first one's input (`_compose`), which it absorbs."""
    args = _window_stage(classifier, spec.node, spec.op)
    if isinstance(args, str):
        classifier.reject(spec, args)
        return
    composed = _absorbed_window(classifier, spec.node, args)
    spec.args = composed if composed is not None else args
    spec.family = COPY


def _window_stage(classifier: Classifier, node: fx.Node, op: str) -> dict[str, Any] | str:
    """The args of one pad or roll on its own, or the reason it stays PyTorch."""
    x = _input(node)
    value = classifier.value(x)
    if not _is_f32(value) or value.dim() == 0 or value.dim() > MAX_DIMS:
        return f"{op} of a tensor that is not float32 with 1 to {MAX_DIMS} dims"
    rank = value.dim()
    lo, hi = [0] * rank, [0] * rank
    if op == "pad":
        pads = _ints(_arg(node, 1, "pad"))
        mode = _arg(node, 2, "mode", "constant")
        fill = _arg(node, 3, "value", None)
        fill = 0.0 if fill is None else fill
        if pads is None or len(pads) % 2 or len(pads) > 2 * rank or mode != "constant":
            return "pad other than constant padding by constant amounts"
        if not isinstance(fill, (int, float)) or isinstance(fill, bool):
            return "pad with a non-constant value"
        for i in range(len(pads) // 2):  # pairs from the last dim backwards
            lo[rank - 1 - i], hi[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
        return {"input": x, "mode": "pad", "lo": lo, "hi": hi, "value": float(fill)}
    shifts, dims = _ints(_arg(node, 1, "shifts")), _ints(_arg(node, 2, "dims"))
    if shifts is None or dims is None or len(shifts) != len(dims) or not dims:
        return "roll without constant shifts and dims (a flattened roll)"
    for shift, dim in zip(shifts, dims, strict=True):
        lo[dim % rank] += shift
    return {"input": x, "mode": "roll", "lo": lo, "hi": hi, "value": 0.0}


def _absorbed_window(classifier: Classifier, node: fx.Node, args: dict[str, Any]) -> dict[str, Any] | None:
    """`args` composed with the single pad or roll it reads (listed in `lead`), or None when the
    input is no such op, has other readers, has absorbed one itself, or does not compose."""
    x = args["input"]
    if not isinstance(x, fx.Node) or len(x.users) != 1 or classifier.is_inplace_node(x):
        return None
    op = classifier.canonical(x) if x.op.startswith("call") else ""
    if op not in WINDOW_OPS:
        return None
    inner = _window_stage(classifier, x, op)
    if isinstance(inner, str) or _absorbed_window(classifier, x, inner) is not None:
        return None
    composed = _compose(inner, args)
    if composed is not None:
        composed.update(input=inner["input"], lead=[x])
    return composed


def _compose(first: dict[str, Any], then: dict[str, Any]) -> dict[str, Any] | None:
    """Two windows as one (templates/layout.cuh): rolls add their shifts; pads that only grow, with
    one value, add up; a roll and a pad in either order keep the pad's lo/hi/value and the roll's
    shift (modes `roll_pad` and `pad_roll`, named in the order they apply)."""
    modes = (first["mode"], then["mode"])
    total = [a + b for a, b in zip(first["lo"], then["lo"], strict=True)]
    if modes == ("roll", "roll"):
        return {**then, "lo": total}
    if modes == ("pad", "pad"):
        grow = all(v >= 0 for v in (*first["lo"], *first["hi"], *then["lo"], *then["hi"]))
        if not grow or first["value"] != then["value"]:
            return None
        return {**then, "lo": total, "hi": [a + b for a, b in zip(first["hi"], then["hi"], strict=True)]}
    pad, roll = (then, first) if modes == ("roll", "pad") else (first, then)
    return {**pad, "mode": "_".join(modes), "shift": list(roll["lo"])}


def _nll_pick(classifier: Classifier, spec: OpSpec) -> None:
    """`_stitch_nll_pick(x, target, dim, ignore_index)`: float32 scores, int64 class targets."""
    node = spec.node
    x, target, dim, ignore = (list(node.args) + [None] * 4)[:4]
    scores, classes = classifier.value(x), classifier.value(target)
    if not _is_f32(scores) or not isinstance(classes, torch.Tensor) or classes.dtype != torch.int64:
        classifier.reject(spec, "nll_pick of other than float32 scores and int64 targets")
        return
    if type(dim) is not int or type(ignore) is not int or node.kwargs:
        classifier.reject(spec, "nll_pick with a non-constant dim or ignore_index")
        return
    spec.family = COPY
    spec.args = {
        "input": x,
        "target": target,
        "dim": dim % scores.dim(),
        "ignore": ignore,
        "mode": "nll_pick",
    }


def _fill(classifier: Classifier, spec: OpSpec, x: Any) -> None:
    node, op = spec.node, spec.op
    value: Any = {"zeros_like": 0.0, "ones_like": 1.0}.get(op)
    if op == "full_like":
        value = _arg(node, 1, "fill_value")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        classifier.reject(spec, f"{op} with a non-constant value")
        return
    dtype = node.kwargs.get("dtype")
    if dtype not in (None, torch.float32):
        classifier.reject(spec, f"{op} with dtype {dtype}")
        return
    spec.family = COPY
    spec.args = {"input": x, "mode": "fill", "value": float(value)}


_RESHAPES = frozenset({"reshape", "flatten", "reshape_as"})


def copying_reshape(classifier: Classifier, spec: OpSpec) -> bool:
    """A reshape PyTorch can only make with a copy (`x.transpose(1, 2).reshape(b, n, c)`, a ViT's
    unfolded patches): our strided gather makes that copy, written straight in the new shape (the
    element order is the input's row-major order either way). True when `spec` became one; a reshape
    that is a view stays a view."""
    node = spec.node
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if name not in _RESHAPES or node.op not in ("call_method", "call_function"):
        return False
    x = _input(node)
    value, out = classifier.value(x), classifier.value(node)
    if not (_is_f32(value) and _is_f32(out)) or value.dim() > MAX_DIMS:
        return False
    try:
        value.view(out.shape)
        return False  # viewable: PyTorch copies nothing
    except RuntimeError:
        pass
    spec.op, spec.family = "reshape", COPY
    spec.args = {"input": x, "mode": "contiguous", "shape": tuple(int(s) for s in out.shape)}
    return True


def noop_conversion(classifier: Classifier, spec: OpSpec) -> bool:
    """`x.to(device)` / `x.to(torch.float32)` / `x.float()` that keep a float32 tensor's dtype: PyTorch
    returns `x` itself (on the same device), so it is a view, no kernel. True when `spec` became one."""
    from codegen.frontend.families import VIEW

    node = spec.node
    if node.op != "call_method" or node.target not in ("to", "float") or not node.args:
        return False
    value, out = classifier.value(node.args[0]), classifier.value(node)
    if not (_is_f32(value) and _is_f32(out)) or tuple(value.shape) != tuple(out.shape):
        return False
    rest = [*node.args[1:], *(v for k, v in node.kwargs.items() if k in ("dtype", "device"))]
    extra = set(node.kwargs) - {"dtype", "device", "non_blocking"}
    if extra or node.kwargs.get("non_blocking") not in (None, False):
        return False
    for arg in rest:
        if isinstance(arg, fx.Node):
            is_device = arg.op == "call_function" and arg.target is getattr and arg.args[1:] == ("device",)
            if not is_device:
                return False
        elif not (arg is torch.float32 or isinstance(arg, (str, torch.device))):
            return False
    spec.op, spec.family = "view", VIEW
    return True
