# Estimate (H200, fp32): 43.5 GFLOP (2 * 32 * 128 * 96 * 96 * 64 * 9); 226 MB moved by the fused form
# (75 MB input, 151 MB output), ~0.7 GB by eager (conv out, ReLU, add); ~1.2-2.3 ms eager.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 96
width = 96


class Model(nn.Module):
    """Conv2d (3x3, same padding, bias), ReLU, then a learned per-channel bias added."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
