"""Classify `nn.LSTM`, `nn.GRU` and `nn.RNN` calls into one recurrent-layer record (family RNN).

Why a module of its own: an RNN module is one node in the trace (its forward is a single call into
PyTorch's fused RNN op), so it is covered as a whole: codegen/emit/rnn.py runs, per layer and
direction, one GEMM for all time steps' input projections, then a host loop in our C++ with one
kernel per step (the recurrent product and the cell fused). What that loop does not implement stays PyTorch
with a reason: inter-layer dropout in training, LSTM projections (`proj_size`), unbatched or packed
inputs, non-float32 tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx
from torch import nn

if TYPE_CHECKING:
    from codegen.frontend.ops import Classifier, OpSpec

RNN = "rnn"  # the family of recurrent layers (LSTM, GRU)
RNN_OPS = frozenset({"lstm", "gru", "rnn"})
RNN_MODULES: list[tuple[type, str]] = [(nn.LSTM, "lstm"), (nn.GRU, "gru"), (nn.RNN, "rnn")]
GATES = {"lstm": 4, "gru": 3, "rnn": 1}


@dataclass(frozen=True)
class RnnParams:
    """The shape of one recurrent module call."""

    mode: str  # 'lstm' | 'gru' | 'rnn_tanh' | 'rnn_relu'
    layers: int
    directions: int
    input_size: int
    hidden: int
    batch: int
    seq: int
    batch_first: bool
    bias: bool


def _hidden_state(value: Any, params: RnnParams) -> bool:
    expected = (params.layers * params.directions, params.batch, params.hidden)
    return isinstance(value, torch.Tensor) and value.dtype == torch.float32 and tuple(value.shape) == expected


def classify_rnn(classifier: Classifier, spec: OpSpec) -> None:
    """Fill `spec` (family RNN, args) or reject it with the reason it stays PyTorch."""

    def reject(reason: str) -> None:
        classifier.reject(spec, f"{spec.op}: {reason}")

    node = spec.node
    if node.op != "call_module":
        reject("only module calls are generated")
        return
    module: Any = classifier.root.get_submodule(str(node.target))  # nn.RNNBase: its sizes are ints
    if set(node.kwargs) - {"input", "hx"} or len(node.args) + len(node.kwargs) > 2:
        reject("unexpected arguments")
        return
    x = node.args[0] if node.args else node.kwargs.get("input")
    hx = node.args[1] if len(node.args) > 1 else node.kwargs.get("hx")
    if getattr(module, "proj_size", 0):
        reject("proj_size (LSTM projections) is not generated")
        return
    if module.dropout and module.training and module.num_layers > 1:
        reject("inter-layer dropout in training is random")
        return
    value = classifier.value(x)
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float32 or value.dim() != 3:
        reject("needs a batched 3-D float32 input (packed and unbatched inputs stay PyTorch)")
        return
    if any(p.dtype != torch.float32 for p in module.parameters()):
        reject("weights are not float32")
        return
    batch, seq = (value.shape[0], value.shape[1]) if module.batch_first else (value.shape[1], value.shape[0])
    params = RnnParams(
        mode=f"rnn_{module.nonlinearity}" if spec.op == "rnn" else spec.op,
        layers=int(module.num_layers),
        directions=2 if module.bidirectional else 1,
        input_size=int(module.input_size),
        hidden=int(module.hidden_size),
        batch=int(batch),
        seq=int(seq),
        batch_first=bool(module.batch_first),
        bias=bool(module.bias),
    )
    h0: Any = None
    c0: Any = None
    if spec.op == "lstm" and hx is not None:
        if not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            reject("hx is not an (h0, c0) pair of graph values")
            return
        h0, c0 = hx
    elif hx is not None:
        h0 = hx
    for state in (h0, c0):
        if state is not None and not (
            isinstance(state, fx.Node) and _hidden_state(classifier.value(state), params)
        ):
            reject("initial state is not a (layers * directions, batch, hidden) float32 tensor")
            return
    spec.family = RNN
    spec.args = {"input": x, "h0": h0, "c0": c0, "module": str(node.target), "params": params}


def rnn_flops(spec: OpSpec) -> int:
    """2 x multiply-adds of the input and recurrent GEMMs (the cell's elementwise math is small)."""
    p: RnnParams = spec.args["params"]
    gates = GATES[p.mode.split("_")[0]] * p.hidden
    total = 0
    for layer in range(p.layers):
        width = p.input_size if layer == 0 else p.hidden * p.directions
        total += p.directions * 2 * p.seq * p.batch * gates * (width + p.hidden)
    return total + math.prod((p.seq, p.batch, p.hidden, p.directions, p.layers)) * 10
