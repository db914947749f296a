# Estimate (H200, fp32): 2-layer LSTM, batch 16, sequence 256, input 128, hidden 512, then a
# linear head on the last step: 2 x 256 steps x (16 x 4*512 x (in + 512)) MACs = ~9.6 GFLOP, of
# which the recurrent half is 512 dependent small GEMMs; eager (cuDNN) ~2-4 ms, latency-bound.
import torch
import torch.nn as nn

batch_size = 16
seq_len = 256
input_size = 128
hidden_size = 512
num_layers = 2
output_size = 64


class Model(nn.Module):
    """Stacked LSTM over a sequence; the last step's hidden state goes through a linear head."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, output_size: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])


def get_inputs():
    x = torch.rand(batch_size, seq_len, input_size)
    h0 = torch.rand(num_layers, batch_size, hidden_size) * 0.2 - 0.1
    c0 = torch.rand(num_layers, batch_size, hidden_size) * 0.2 - 0.1
    return [x, h0, c0]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, output_size]
