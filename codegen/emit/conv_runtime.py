"""Runtime helpers of convolution programs, copied verbatim into every program with a conv group.

Like runtime.py they are real Python so that they are linted and tested on the CPU; a program may
use only torch, the standard library, the module-level `_ext` (the built extension) and runtime.py's
helpers, which every program with a conv group also carries.
"""

from __future__ import annotations

from typing import Any

import torch

from codegen.emit.runtime import _stitch_stream  # pasted beside these helpers in every program

_ext: Any = None  # the program binds its built extension here
# One growing cuDNN workspace per (device, stream), owned by PyTorch's caching allocator, so it is
# stream-ordered and legal to allocate inside a CUDA-graph capture.
_STITCH_CONV_WORKSPACES: dict[tuple[int, int], torch.Tensor] = {}


def _stitch_conv_out_size(
    size: int, kernel: int, pad: int, stride: int, dilation: int, transposed: bool, output_padding: int
) -> int:
    """One spatial extent of a convolution's output, as PyTorch computes it."""
    if transposed:
        return (size - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _stitch_conv3(values: tuple[int, ...] | list[int], fill: int) -> list[int]:
    """Per-dim values padded to the launcher's three spatial slots."""
    values = [int(v) for v in values]
    return values + [fill] * (3 - len(values))


# The shape-dependent part of a call, computed and checked once per (shapes, parameters, TF32 mode):
# every timed call of the harness waits for the helper's Python before the first kernel, and this halves
# it (27-28 -> 11-13 us a call on the CPU machine, evals/benchmarks/conv_helper_host.py; docs/convolutions.md).
_STITCH_CONV_SHAPES: dict[tuple[object, ...], tuple[tuple[int, ...], tuple[int, ...]]] = {}


def _stitch_conv_shape(
    key: tuple[
        tuple[int, ...],
        tuple[int, ...],
        tuple[int, ...],
        tuple[int, ...],
        tuple[int, ...],
        int,
        bool,
        tuple[int, ...],
        int,
        bool,
    ],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(output shape, the launcher's integer arguments) of one call, after checking the operands; `key`
    is the call's (input shape, weight shape, stride, padding, dilation, groups, transposed,
    output_padding, act, TF32 allowed), as `_stitch_conv` passes it."""
    x_shape, w_shape, stride, padding, dilation, groups, transposed, output_padding, act, tf32 = key
    nd = len(x_shape) - 2
    n, c = int(x_shape[0]), int(x_shape[1])
    k = int(w_shape[1]) * groups if transposed else int(w_shape[0])
    if c != (int(w_shape[0]) if transposed else int(w_shape[1]) * groups):
        raise ValueError(f"conv: input has {c} channels, weight {tuple(w_shape)} with groups={groups}")
    sizes = [
        _stitch_conv_out_size(
            int(x_shape[2 + i]),
            int(w_shape[2 + i]),
            padding[i],
            stride[i],
            dilation[i],
            transposed,
            output_padding[i],
        )
        for i in range(nd)
    ]
    if min(sizes, default=1) < 1:
        raise ValueError(f"conv: output size {sizes} of input {tuple(x_shape)} is too small")
    args = (
        n,
        c,
        k,
        *_stitch_conv3(x_shape[2:], 1),
        *_stitch_conv3(w_shape[2:], 1),
        *_stitch_conv3(sizes, 1),
        *_stitch_conv3(padding, 0),
        *_stitch_conv3(stride, 1),
        *_stitch_conv3(dilation, 1),
        nd,
        groups,
        int(transposed),
        act,
        int(tf32),
    )
    return (n, k, *sizes), args


def _stitch_conv(
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
    transposed: bool,
    output_padding: tuple[int, ...],
    act: int,
) -> torch.Tensor:
    """act(conv(x, w) + bias + residual) through cuDNN on the caller's stream (act 1: ReLU).

    A transposed convolution runs as cuDNN's backward-data convolution. TF32 is used only when
    PyTorch allows it for cuDNN (torch.backends.cudnn.allow_tf32, read at every call), so the math
    follows the harness's setting.
    """
    x = x.contiguous()
    w = w.contiguous()
    tf32 = torch.backends.cudnn.allow_tf32
    key = (x.shape, w.shape, stride, padding, dilation, groups, transposed, output_padding, act, tf32)
    known = _STITCH_CONV_SHAPES.get(key)
    if known is None:
        known = _STITCH_CONV_SHAPES[key] = _stitch_conv_shape(key)
    shape, args = known
    y = torch.empty(shape, device=x.device, dtype=torch.float32)
    if y.numel() == 0:
        return y
    b = bias.contiguous().data_ptr() if bias is not None else 0
    r = 0
    if residual is not None:
        if residual.shape != y.shape:
            raise ValueError(f"conv: residual shape {tuple(residual.shape)} differs from the output {shape}")
        r = residual.contiguous().data_ptr()
    stream = _stitch_stream(y)
    slot = (y.device.index or 0, stream)
    workspace = _STITCH_CONV_WORKSPACES.get(slot)
    if workspace is None:
        workspace = torch.empty(0, device=y.device, dtype=torch.uint8)
    pointers = (x.data_ptr(), w.data_ptr(), b, r, y.data_ptr())
    wanted = _ext.conv(*pointers, *args, workspace.data_ptr(), workspace.numel(), stream)
    if wanted > workspace.numel():  # first call of a shape needing more: grow, then run
        workspace = torch.empty(wanted, device=y.device, dtype=torch.uint8)
        _STITCH_CONV_WORKSPACES[slot] = workspace
        _ext.conv(*pointers, *args, workspace.data_ptr(), workspace.numel(), stream)
    return y
