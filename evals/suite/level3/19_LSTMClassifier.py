# Estimate (H200, fp32): bidirectional 2-layer LSTM, batch 32, sequence 192, input 256, hidden 384,
# mean over time, then a linear head: 2 directions x (192 x 32 x 4*384 x (256 + 384) + 192 x 32 x
# 4*384 x (768 + 384)) x 2 = ~67.6 GFLOP, of which the recurrent part is 768 dependent small GEMMs;
# eager (cuDNN) ~3-5 ms, latency-bound by the recurrence.
import torch
import torch.nn as nn

batch_size = 32
seq_len = 192
input_size = 256
hidden_size = 384
num_layers = 2
num_classes = 40


class Model(nn.Module):
    """Sequence classifier: bidirectional stacked LSTM (zero initial state), mean over time, linear head."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, num_classes: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out.mean(dim=1))


def get_inputs():
    return [torch.rand(batch_size, seq_len, input_size) * 2 - 1]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, num_classes]
