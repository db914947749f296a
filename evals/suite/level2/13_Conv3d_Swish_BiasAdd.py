# Estimate (H200, fp32): 58.0 GFLOP (2 * 8 * 64 * 16 * 64 * 64 * 32 * 27); 201 MB moved by the fused form,
# ~0.7 GB by eager (sigmoid, multiply, add); ~1.6-3.1 ms eager.
import torch
import torch.nn as nn

batch_size = 8
in_channels = 32
out_channels = 64
depth = 16
height = 64
width = 64


class Model(nn.Module):
    """Conv3d (3x3x3, same padding), swish (x * sigmoid(x)), then a learned per-channel bias added."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        return x * torch.sigmoid(x) + self.bias


def get_inputs():
    x = torch.rand(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
