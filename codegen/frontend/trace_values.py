"""What a decomposition may ask about the proxies it receives: the meta tensor behind each one.

The capture tracer (capture.py) evaluates every node on meta tensors as it records it and keeps the
results in `tracer.values`; a decomposition reads ranks, shapes and dtypes from there to choose how
to write a call out (and returns NotImplemented when it cannot tell).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx


def meta_of(tracer: fx.Tracer, value: Any) -> torch.Tensor | None:
    """The meta tensor a proxy stands for (a plain tensor stands for itself)."""
    meta = getattr(tracer, "values", {}).get(value.node) if isinstance(value, fx.Proxy) else value
    return meta if isinstance(meta, torch.Tensor) else None


def dtype_of(tracer: fx.Tracer, value: Any) -> torch.dtype | None:
    meta = meta_of(tracer, value)
    return None if meta is None else meta.dtype


def rank_of(tracer: fx.Tracer, value: Any) -> int:
    """The tensor's number of dims, -1 when the value is no tensor."""
    meta = meta_of(tracer, value)
    return -1 if meta is None else meta.dim()


def shape_of(tracer: fx.Tracer, value: Any) -> tuple[int, ...]:
    meta = meta_of(tracer, value)
    assert meta is not None, "callers check the rank first"
    return tuple(int(s) for s in meta.shape)


def is_f32(tracer: fx.Tracer, *values: Any) -> bool:
    """Every value is a float32 tensor (the dtype our kernels compute in)."""
    return all(dtype_of(tracer, v) == torch.float32 for v in values)
