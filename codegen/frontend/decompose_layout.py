"""`torch.einsum` as permutes and GEMMs, `Tensor.unfold` and `einops.rearrange` as views.

Why: an einsum is one opaque call (PyTorch's own permute-and-bmm planning); written out, each
contraction is the one GEMM (or batched GEMM) cuBLASLt runs for us, with any operand reordering made
explicit (a `contiguous()` our strided-gather kernel performs) and the final reordering a view.
Non-overlapping windows (`x.unfold(d, p, p)`, a ViT's patch extraction) are a narrow, an unflatten
and a movedim of the input, and an einops rearrange a reshape, a permute and a reshape: views,
which the consumer then reads or our gather copies.
Variants not written out (repeated letters in one operand, broadcasting sizes, overlapping windows)
return NotImplemented and stay one PyTorch call, listed as uncovered.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx

from codegen.frontend.trace_values import is_f32, meta_of, rank_of, shape_of

Term = str  # one operand's subscript letters, in dim order


def _expand_ellipses(
    tracer: fx.Tracer, terms: list[str], output: str | None, operands: tuple[Any, ...]
) -> Any:
    """Replace `...` by letters the equation does not use (aligned from the right, as broadcasting)."""
    used = set("".join(terms) + (output or ""))
    pool = [c for c in string.ascii_letters if c not in used]
    widths = []
    for term, operand in zip(terms, operands, strict=True):
        explicit = len(term.replace("...", ""))
        widths.append(rank_of(tracer, operand) - explicit if "..." in term else 0)
    widest = max(widths, default=0)
    if widest > len(pool) or any(w < 0 for w in widths):
        return NotImplemented
    letters = "".join(pool[:widest])
    expanded = [term.replace("...", letters[widest - w :]) for term, w in zip(terms, widths, strict=True)]
    if output is not None:
        output = output.replace("...", letters)
    elif widest:
        once = [c for c in sorted(set("".join(expanded)) - set(letters)) if "".join(expanded).count(c) == 1]
        output = letters + "".join(once)
    return expanded, output


def _parse(tracer: fx.Tracer, equation: str, operands: tuple[Any, ...]) -> tuple[list[Term], Term] | None:
    """(terms, output) with every letter's size consistent, or None for what is not written out."""
    text = equation.replace(" ", "")
    lhs, _, rhs = text.partition("->")
    terms = lhs.split(",")
    output: str | None = rhs if "->" in text else None
    if len(terms) != len(operands):
        return None
    if "." in text:
        expanded = _expand_ellipses(tracer, terms, output, operands)
        if expanded is NotImplemented:
            return None
        terms, output = expanded
    joined = "".join(terms)
    if output is None:
        output = "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    sizes: dict[str, int] = {}
    for term, operand in zip(terms, operands, strict=True):
        bad_letters = bool(term) and not term.isalpha()
        if bad_letters or len(set(term)) != len(term) or len(term) != rank_of(tracer, operand):
            return None  # a repeated letter is a diagonal: not written out
        for letter, size in zip(term, shape_of(tracer, operand), strict=True):
            if sizes.setdefault(letter, size) != size:
                return None  # size-1 broadcasting between operands: not written out
    if len(set(output)) != len(output) or not set(output) <= set(joined):
        return None
    return terms, output


def _sum_out(tensor: Any, term: Term, keep: set[str]) -> tuple[Any, Term]:
    """Sum the letters nothing later needs (they occur in this operand only)."""
    drop = tuple(i for i, c in enumerate(term) if c not in keep)
    if not drop:
        return tensor, term
    return torch.sum(tensor, dim=drop), "".join(c for c in term if c in keep)


def _permutation(term: Term, order: Term) -> list[int]:
    return [term.index(c) for c in order]


def _viewable(tracer: fx.Tracer, tensor: Any, term: Term, order: Term, sizes: list[int]) -> bool:
    """Can `tensor`, its dims put in `order`, be viewed as `sizes` without a copy?"""
    meta = meta_of(tracer, tensor)
    if meta is None:
        return False
    try:
        meta.permute(*_permutation(term, order)).view(sizes)
    except RuntimeError:
        return False
    return True


def _arranged(tracer: fx.Tracer, tensor: Any, term: Term, order: Term, sizes: list[int]) -> Any:
    """`tensor` with its dims in `order`, reshaped to `sizes`; a copy (our gather) only when the
    reordered dims cannot be viewed that way."""
    perm = _permutation(term, order)
    if perm != list(range(len(perm))):
        tensor = tensor.permute(*perm)
    if not _viewable(tracer, tensor, order, order, sizes):  # `tensor` is in `order` now
        tensor = tensor.contiguous()
    return tensor.reshape(*sizes)


def _contract(
    tracer: fx.Tracer, a: Any, ta: Term, b: Any, tb: Term, keep: set[str], size: dict[str, int]
) -> tuple[Any, Term]:
    """One pairwise contraction: [batch, a-only, shared] x [batch, shared, b-only] as one GEMM."""
    a, ta = _sum_out(a, ta, keep | set(tb))
    b, tb = _sum_out(b, tb, keep | set(ta))
    batch = "".join(c for c in ta if c in tb and c in keep)
    shared = "".join(c for c in ta if c in tb and c not in keep)
    a_only = "".join(c for c in ta if c not in tb)
    b_only = "".join(c for c in tb if c not in ta)

    def prod(letters: str) -> int:
        return math.prod(size[c] for c in letters)

    result_term = batch + a_only + b_only
    result_sizes = [size[c] for c in result_term]
    if not shared:  # an outer product per batch: a broadcast multiply
        left = _arranged(tracer, a, ta, batch + a_only, [size[c] for c in batch + a_only] + [1] * len(b_only))
        right = _arranged(
            tracer,
            b,
            tb,
            batch + b_only,
            [size[c] for c in batch] + [1] * len(a_only) + [size[c] for c in b_only],
        )
        return left * right, result_term
    batched = [prod(batch)] if batch else []
    # a permuted operand is usually still a view (the GEMM reads it transposed); else our gather copies
    left = _arranged(tracer, a, ta, batch + a_only + shared, [*batched, prod(a_only), prod(shared)])
    right = _arranged(tracer, b, tb, batch + shared + b_only, [*batched, prod(shared), prod(b_only)])
    product = torch.bmm(left, right) if batch else torch.matmul(left, right)
    return product.reshape(*result_sizes), result_term


def einsum(tracer: fx.Tracer, equation: Any, *operands: Any) -> Any:
    """Contract left to right, each step one GEMM; letters of one operand only are summed first."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str) or not operands or not is_f32(tracer, *operands):
        return NotImplemented
    parsed = _parse(tracer, equation, operands)
    if parsed is None:
        return NotImplemented
    terms, output = parsed
    size = {
        c: s
        for term, t in zip(terms, operands, strict=True)
        for c, s in zip(term, shape_of(tracer, t), strict=True)
    }
    current, term = operands[0], terms[0]
    for index in range(1, len(operands)):
        keep = set(output).union(*terms[index + 1 :])
        current, term = _contract(tracer, current, term, operands[index], terms[index], keep, size)
    current, term = _sum_out(current, term, set(output))
    perm = [term.index(c) for c in output]
    return current.permute(*perm) if perm != list(range(len(perm))) else current


def unfold_method(tracer: fx.Tracer, input: Any, dimension: Any, size: Any, step: Any) -> Any:
    """`x.unfold(d, p, p)`: windows that neither overlap nor skip are a reshape of dim d,
    [..., n, ...] -> [..., n // p, ..., p] (a trailing remainder dropped, as unfold drops it)."""
    rank = rank_of(tracer, input)
    constants = all(isinstance(v, int) and not isinstance(v, bool) for v in (dimension, size, step))
    if rank < 1 or not constants or size != step or size < 1:
        return NotImplemented
    dim = dimension % rank
    length = shape_of(tracer, input)[dim]
    windows = length // size
    if windows == 0:
        return NotImplemented
    if windows * size != length:
        input = input.narrow(dim, 0, windows * size)
    return input.unflatten(dim, (windows, size)).movedim(dim + 1, -1)


_ELLIPSIS = "..."


def _rearrange_side(text: str) -> list[list[str]] | None:
    """One side of an einops pattern as items, each a list of axis names ([] for `()`), `...` alone."""
    items: list[list[str]] = []
    group: list[str] | None = None
    for token in text.replace("(", " ( ").replace(")", " ) ").split():
        if token == "(":
            if group is not None:
                return None
            group = []
        elif token == ")":
            if group is None:
                return None
            items.append(group)
            group = None
        elif token == _ELLIPSIS or token.isidentifier():
            if token == _ELLIPSIS and group is not None:
                return None  # an ellipsis inside parentheses: not written out
            items.append([token]) if group is None else group.append(token)
        else:
            return None  # anonymous axes such as `1`: not written out
    return None if group is not None else items


def _axis_sizes(
    items: list[list[str]], shape: tuple[int, ...], known: dict[str, int]
) -> tuple[dict[str, int], list[str]] | None:
    """Every elementary axis' size (an ellipsis expands to axes named `...0`, `...1`, ...) and the
    elementary axes in order; None when the sizes do not resolve."""
    ellipses = sum(item == [_ELLIPSIS] for item in items)
    if ellipses > 1 or len(items) - ellipses > len(shape) or (not ellipses and len(items) != len(shape)):
        return None
    sizes, order = dict(known), []
    dims = iter(shape)
    for item in items:
        if item == [_ELLIPSIS]:
            for i in range(len(shape) - (len(items) - 1)):
                sizes[f"...{i}"] = next(dims)
                order.append(f"...{i}")
            continue
        size = next(dims)
        unknown = [name for name in item if name not in sizes]
        if len(unknown) > 1:
            return None
        rest = math.prod(sizes[name] for name in item if name in sizes)
        if unknown:
            if rest == 0 or size % rest:
                return None
            sizes[unknown[0]] = size // rest
        elif rest != size:
            return None
        order += item
    return sizes, order


def rearrange(tracer: fx.Tracer, tensor: Any, pattern: Any, **axes_lengths: Any) -> Any:
    """`einops.rearrange` as a reshape to the elementary axes, a permute, and a reshape to the
    output's groups (each skipped when it changes nothing); only patterns made of names, groups and
    one ellipsis, with every output axis an input axis."""
    if not isinstance(pattern, str) or "->" not in pattern or rank_of(tracer, tensor) < 0:
        return NotImplemented
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in axes_lengths.values()):
        return NotImplemented
    left_text, right_text = pattern.split("->", 1)
    left, right = _rearrange_side(left_text), _rearrange_side(right_text)
    if left is None or right is None:
        return NotImplemented
    resolved = _axis_sizes(left, shape_of(tracer, tensor), axes_lengths)
    if resolved is None:
        return NotImplemented
    sizes, order = resolved
    ellipsis_axes = [name for name in order if name.startswith(_ELLIPSIS)]
    out_items: list[list[str]] = []
    for item in right:  # an ellipsis stands for its axes one by one
        out_items += [[name] for name in ellipsis_axes] if item == [_ELLIPSIS] else [item]
    out_order = [name for item in out_items for name in item]
    if sorted(out_order) != sorted(order) or len(set(order)) != len(order):
        return NotImplemented  # a new or repeated axis (repeat / reduce): not written out
    current = tensor
    if len(order) != rank_of(tracer, tensor):
        current = current.reshape(*[sizes[name] for name in order])
    perm = [order.index(name) for name in out_order]
    if perm != list(range(len(perm))):
        current = current.permute(*perm)
    out_shape = [math.prod(sizes[name] for name in item) for item in out_items]
    if out_shape != [sizes[name] for name in out_order] or len(out_items) != len(out_order):
        current = current.reshape(*out_shape)
    return current


LAYOUT_FUNCTIONS: dict[Any, Callable[..., Any]] = {torch.einsum: einsum}
try:  # einops is optional: problems that import it need it installed anyway
    import einops

    LAYOUT_FUNCTIONS[einops.rearrange] = rearrange
    # functions fx must record as calls when a problem calls them by their bare names
    AUTOWRAP_FUNCTIONS: tuple[Callable[..., Any], ...] = (einops.rearrange, einops.repeat, einops.reduce)
except ImportError:  # pragma: no cover - einops missing
    AUTOWRAP_FUNCTIONS = ()
LAYOUT_METHODS: dict[str, Callable[..., Any]] = {"unfold": unfold_method}
