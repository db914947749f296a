"""GLU, cosine similarity, pixel (un)shuffle and nearest upsampling written out while the tracer records.

Why: each is one opaque call left to PyTorch, yet only views, a copy and elementwise math or a
reduction, which the fusion planner turns into our kernels. The formulas follow PyTorch's:
- glu(x, dim): the first half times the sigmoid of the second (two views of x);
- cosine_similarity(x1, x2, dim, eps): each input divided by its 2-norm over `dim` clamped below at
  eps, then the sum of the products (ATen divides first, which keeps the result within [-1, 1]);
- pixel_shuffle(x, r): (N, C r^2, H, W) viewed as (N, C, r, r, H, W), permuted to
  (N, C, H, r, W, r), then reshaped (a copying reshape: our strided gather); pixel_unshuffle the
  inverse;
- interpolate / Upsample with mode 'nearest' and whole scale factors (or sizes that are whole
  multiples): each element repeated s times per dim, an expanded view gathered into place.
Other variants (a scale that is not whole, other modes, align_corners, recompute_scale_factor,
antialias) return NotImplemented and stay one PyTorch call, listed as uncovered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from codegen.frontend.decompose_losses import _module_call, _same_names
from codegen.frontend.trace_values import is_f32, rank_of, shape_of


def glu(tracer: fx.Tracer, input: Any, dim: Any = -1) -> Any:
    """`F.glu` / `nn.GLU`: a * sigmoid(b) for the halves a, b of `input` along `dim`."""
    rank = rank_of(tracer, input)
    if not is_f32(tracer, input) or rank < 1 or not isinstance(dim, int) or isinstance(dim, bool):
        return NotImplemented
    size = shape_of(tracer, input)[dim % rank]
    if size % 2:
        return NotImplemented  # PyTorch raises: an odd size cannot be halved
    a, b = torch.narrow(input, dim, 0, size // 2), torch.narrow(input, dim, size // 2, size // 2)
    return a * torch.sigmoid(b)


def cosine_similarity(tracer: fx.Tracer, x1: Any, x2: Any, dim: Any = 1, eps: Any = 1e-8) -> Any:
    """`F.cosine_similarity` / `nn.CosineSimilarity` over one dim of two same-rank float32 tensors."""
    if not is_f32(tracer, x1, x2) or rank_of(tracer, x1) != rank_of(tracer, x2) or rank_of(tracer, x1) < 1:
        return NotImplemented
    if not isinstance(dim, int) or isinstance(dim, bool) or isinstance(eps, bool):
        return NotImplemented
    if not isinstance(eps, (int, float)):
        return NotImplemented
    n1 = torch.clamp(torch.sqrt(torch.sum(x1 * x1, dim, keepdim=True)), min=float(eps))
    n2 = torch.clamp(torch.sqrt(torch.sum(x2 * x2, dim, keepdim=True)), min=float(eps))
    return torch.sum((x1 / n1) * (x2 / n2), dim)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def pixel_shuffle(tracer: fx.Tracer, input: Any, upscale_factor: Any) -> Any:
    """`F.pixel_shuffle` / `nn.PixelShuffle` of an (N, C r^2, H, W) float32 tensor."""
    if not is_f32(tracer, input) or rank_of(tracer, input) != 4 or not _whole(upscale_factor):
        return NotImplemented
    n, c, h, w = shape_of(tracer, input)
    r = upscale_factor
    if c % (r * r):
        return NotImplemented
    x = input.reshape(n, c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(n, c // (r * r), h * r, w * r)


def pixel_unshuffle(tracer: fx.Tracer, input: Any, downscale_factor: Any) -> Any:
    """`F.pixel_unshuffle` / `nn.PixelUnshuffle` of an (N, C, H r, W r) float32 tensor."""
    if not is_f32(tracer, input) or rank_of(tracer, input) != 4 or not _whole(downscale_factor):
        return NotImplemented
    n, c, h, w = shape_of(tracer, input)
    r = downscale_factor
    if h % r or w % r:
        return NotImplemented
    x = input.reshape(n, c, h // r, r, w // r, r).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(n, c * r * r, h // r, w // r)


def _nearest_factors(spatial: tuple[int, ...], size: Any, scale_factor: Any) -> list[int] | None:
    """The whole repeat factor of each spatial dim, from `size` or `scale_factor`; None otherwise."""
    count = len(spatial)
    if (size is None) == (scale_factor is None):
        return None
    if size is not None:
        sizes = [size] * count if isinstance(size, int) else list(size)
        if len(sizes) != count or not all(_whole(s) for s in sizes):
            return None
        if any(s % d for s, d in zip(sizes, spatial, strict=True)):
            return None
        return [s // d for s, d in zip(sizes, spatial, strict=True)]
    scales = [scale_factor] * count if isinstance(scale_factor, (int, float)) else list(scale_factor)
    if len(scales) != count or any(isinstance(s, bool) or not isinstance(s, (int, float)) for s in scales):
        return None
    if any(float(s) != int(s) or int(s) < 1 for s in scales):
        return None
    return [int(s) for s in scales]


def interpolate(
    tracer: fx.Tracer,
    input: Any,
    size: Any = None,
    scale_factor: Any = None,
    mode: Any = "nearest",
    align_corners: Any = None,
    recompute_scale_factor: Any = None,
    antialias: Any = False,
) -> Any:
    """`F.interpolate` / `nn.Upsample` in mode 'nearest' with whole factors: each element repeated."""
    rank = rank_of(tracer, input)
    if mode != "nearest" or align_corners is not None or recompute_scale_factor or antialias:
        return NotImplemented
    if not is_f32(tracer, input) or rank not in (3, 4, 5):
        return NotImplemented
    shape = shape_of(tracer, input)
    factors = _nearest_factors(shape[2:], size, scale_factor)
    if factors is None:
        return NotImplemented
    # (N, C, D1, 1, D2, 1, ...) expanded to (N, C, D1, s1, D2, s2, ...), gathered into (N, C, D1 s1, ...)
    split = list(shape[:2])
    expanded = list(shape[:2])
    for d, s in zip(shape[2:], factors, strict=True):
        split += [d, 1]
        expanded += [d, s]
    out = list(shape[:2]) + [d * s for d, s in zip(shape[2:], factors, strict=True)]
    return input.reshape(split).expand(expanded).reshape(out)


def upsample(tracer: fx.Tracer, module: nn.Upsample, *args: Any, **kwargs: Any) -> Any:
    if kwargs or len(args) != 1:
        return NotImplemented
    return interpolate(
        tracer,
        args[0],
        size=module.size,
        scale_factor=module.scale_factor,
        mode=module.mode,
        align_corners=module.align_corners,
        recompute_scale_factor=module.recompute_scale_factor,
    )


SHAPES_FUNCTIONS: dict[Any, Callable[..., Any]] = {
    F.glu: glu,
    F.cosine_similarity: cosine_similarity,
    F.pixel_shuffle: pixel_shuffle,
    F.pixel_unshuffle: pixel_unshuffle,
    F.interpolate: interpolate,
}
SHAPES_MODULES: dict[type, Callable[..., Any]] = {
    nn.GLU: _module_call(glu, _same_names("dim")),
    nn.CosineSimilarity: _module_call(cosine_similarity, _same_names("dim", "eps")),
    nn.PixelShuffle: _module_call(pixel_shuffle, _same_names("upscale_factor")),
    nn.PixelUnshuffle: _module_call(pixel_unshuffle, _same_names("downscale_factor")),
    nn.Upsample: upsample,
}
