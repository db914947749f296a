# Estimate (H200, fp32): 77.3 GFLOP (2 * 32 * 128 * 128 * 128 * 64 * 3 * 3); 403 MB moved
# (134 MB input + 0.3 MB weight + 268 MB output); compute-bound, ~1.9-3.9 ms eager with cuDNN at
# 20-40 TFLOP/s.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3


class Model(nn.Module):
    """2-D convolution, square 3x3 kernel, stride 1, padding 1 (same size), with bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
