"""Recurrent layers' meta shapes from their sizes (tools/meta_rnn.py) match what the layers return."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tools.meta_rnn import MetaRnnShapes


@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.LSTM(6, 5, num_layers=2, batch_first=True),
        lambda: nn.LSTM(6, 5, bidirectional=True),
        lambda: nn.LSTM(6, 5, num_layers=2, proj_size=3, bidirectional=True, batch_first=True),
        lambda: nn.GRU(6, 5, num_layers=3, bidirectional=True, batch_first=True),
        lambda: nn.RNN(6, 5, nonlinearity="relu"),
        lambda: nn.RNN(6, 5, num_layers=2, bidirectional=True),
    ],
)
@pytest.mark.parametrize("with_state", [False, True])
def test_meta_shapes_equal_the_real_layers(make, with_state: bool) -> None:
    torch.manual_seed(0)
    layer = make()
    x = torch.rand(4, 7, 6)
    state = None
    if with_state:
        directions = 2 if layer.bidirectional else 1
        batch = x.shape[0] if layer.batch_first else x.shape[1]
        out_size = layer.proj_size or layer.hidden_size
        h0 = torch.rand(layer.num_layers * directions, batch, out_size)
        state = (
            (h0, torch.rand(layer.num_layers * directions, batch, layer.hidden_size))
            if isinstance(layer, nn.LSTM)
            else h0
        )
    real = layer(x, state)
    meta_layer = layer.to("meta")
    meta_state = (
        None
        if state is None
        else tuple(s.to("meta") for s in state)
        if isinstance(state, tuple)
        else state.to("meta")
    )
    with MetaRnnShapes():
        fast = meta_layer(x.to("meta"), meta_state)
    flat_real = [real[0], *(real[1] if isinstance(real[1], tuple) else (real[1],))]
    flat_fast = [fast[0], *(fast[1] if isinstance(fast[1], tuple) else (fast[1],))]
    assert [tuple(t.shape) for t in flat_fast] == [tuple(t.shape) for t in flat_real]
    assert all(t.device.type == "meta" for t in flat_fast)


def test_real_tensors_and_other_calls_pass_through() -> None:
    torch.manual_seed(0)
    layer = nn.GRU(3, 4)
    x = torch.rand(5, 2, 3)
    expected = layer(x)[0]
    with MetaRnnShapes():
        got = layer(x)[0]
        assert torch.equal(torch.relu(x), x.clamp(min=0))
    assert torch.equal(got, expected)
