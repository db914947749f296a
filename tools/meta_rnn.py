"""Shapes of recurrent layers on the meta device without running their recurrence.

Why: PyTorch's meta kernel for `torch.lstm` (and `gru`, `rnn_tanh`, `rnn_relu`) decomposes the
recurrence step by step in Python: 10-70 s per call at suite sizes, spent twice per problem (loading
it for its output specs, tracing it). The results' shapes follow from the input and the hidden
state directly. `MetaRnnShapes` is a torch function mode (thread-local) that answers those calls
with empty meta tensors of the right shapes and passes every other call through unchanged. Only
torch and the standard library.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_RECURRENCES = {torch.lstm, torch.gru, torch.rnn_tanh, torch.rnn_relu}


def meta_rnn_result(func: Any, args: tuple[Any, ...]) -> Any:
    """(output, h_n[, c_n]) as empty meta tensors for a padded (not packed) call on meta inputs;
    None when the call is not one (then it runs as it is)."""
    if func not in _RECURRENCES or len(args) != 9 or not isinstance(args[8], bool):
        return None  # the packed-sequence overloads take batch_sizes second
    x, hx, bidirectional, batch_first = args[0], args[1], args[7], args[8]
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    tensors = [x, *states]
    if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in tensors) or x.dim() != 3:
        return None
    if not isinstance(bidirectional, bool):
        return None
    directions = 2 if bidirectional else 1
    batch, seq = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    seq_shape = (batch, seq) if batch_first else (seq, batch)
    output = x.new_empty((*seq_shape, directions * states[0].shape[-1]))
    finals = tuple(s.new_empty(s.shape) for s in states)
    return (output, *finals)


class MetaRnnShapes(TorchFunctionMode):
    """Answer recurrent-layer calls on meta tensors from their shapes (see the module docstring)."""

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        if not kwargs:
            result = meta_rnn_result(func, args)
            if result is not None:
                return result
        return func(*args, **(kwargs or {}))
