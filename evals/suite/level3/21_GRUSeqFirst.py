# Estimate (H200, fp32): 3-layer GRU, sequence-first, sequence 512, batch 24, input 64, hidden 320;
# the output is the final hidden state of every layer (h_n): 512 x 24 x 3*320 x ((64 + 320) +
# 2 x (320 + 320)) x 2 = ~39 GFLOP, of which the recurrence is 1536 dependent small GEMMs; eager
# (cuDNN) ~4-6 ms, latency-bound.
import torch
import torch.nn as nn

seq_len = 512
batch_size = 24
input_size = 64
hidden_size = 320
num_layers = 3


class Model(nn.Module):
    """Stacked GRU over a (seq, batch, feature) sequence; returns h_n of every layer."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        _, h_n = self.gru(x, h0)
        return h_n


def get_inputs():
    x = torch.rand(seq_len, batch_size, input_size) * 2 - 1
    h0 = torch.rand(num_layers, batch_size, hidden_size) * 0.2 - 0.1
    return [x, h0]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
