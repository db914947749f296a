# Estimate (H200, fp32): 58.0 GFLOP (2 * 8 * 64 * 16 * 64 * 64 * 32 * 27); 201 MB moved (67 MB input,
# 134 MB output); compute-bound, ~1.5-2.9 ms eager with cuDNN at 20-40 TFLOP/s.
import torch
import torch.nn as nn

batch_size = 8
in_channels = 32
out_channels = 64
depth = 16
height = 64
width = 64


class Model(nn.Module):
    """3-D convolution, 3x3x3 kernel, padding 1 (same size), with bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
