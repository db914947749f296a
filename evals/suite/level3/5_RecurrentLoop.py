# Estimate (H200, fp32): 12.9 GFLOP (128 steps x 2 * 32 * (512 + 1024) * 1024); 6 MB of weights
# (L2-resident) and 24 MB of activations; ~0.25 ms of math, but eager launches ~513 kernels
# (two addmm, an add and a tanh per step, one stack) and is launch-bound: ~2.5 ms eager at ~5 us
# per op. This is the problem where host orchestration (CUDA graphs, one persistent kernel) pays.
import torch
import torch.nn as nn

seq_len = 128
batch_size = 32
input_size = 512
hidden_size = 1024


class Model(nn.Module):
    """Elman RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh); returns all hidden states."""

    def __init__(self, input_size: int, hidden_size: int, seq_len: int):
        super().__init__()
        self.seq_len = seq_len
        self.input_to_hidden = nn.Linear(input_size, hidden_size)
        self.hidden_to_hidden = nn.Linear(hidden_size, hidden_size)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        # x: (seq_len, batch, input_size), h0: (batch, hidden_size) -> (seq_len, batch, hidden_size)
        h = h0
        states = []
        for t in range(self.seq_len):
            h = torch.tanh(self.input_to_hidden(x[t]) + self.hidden_to_hidden(h))
            states.append(h)
        return torch.stack(states)


def get_inputs():
    x = torch.rand(seq_len, batch_size, input_size)
    h0 = torch.rand(batch_size, hidden_size)
    return [x, h0]


def get_init_inputs():
    return [input_size, hidden_size, seq_len]
