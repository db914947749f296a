# Estimate (H200, fp32): 2-layer bidirectional GRU, batch 16, sequence 256, input 128, hidden 256:
# ~2 directions x 2 layers x 256 steps x 16 x 3*256 x (in + 256) MACs = ~6 GFLOP; eager (cuDNN)
# ~2-3 ms, latency-bound by the recurrence. The output is the whole sequence (both directions).
import torch
import torch.nn as nn

batch_size = 16
seq_len = 256
input_size = 128
hidden_size = 256
num_layers = 2


class Model(nn.Module):
    """Bidirectional stacked GRU; returns every step's output (forward and backward halves)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers, batch_first=True, bidirectional=True)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x, h0)
        return out


def get_inputs():
    x = torch.rand(batch_size, seq_len, input_size)
    h0 = torch.rand(num_layers * 2, batch_size, hidden_size) * 0.2 - 0.1
    return [x, h0]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
