# Estimate (H200, fp32): 40.3 GFLOP (2 * 4 * 64 * 32 * 64 * 64 * 8 * 3 * 5 * 5); 201 MB moved (67 MB input,
# 134 MB output); ~1.0-2.0 ms eager with cuDNN at 20-40 TFLOP/s.
import torch
import torch.nn as nn

batch_size = 4
in_channels = 8
out_channels = 64
depth = 32
height = 128
width = 128


class Model(nn.Module):
    """3-D convolution, kernel (3, 5, 5), stride (1, 2, 2), padding (1, 2, 2): 32x128x128 -> 32x64x64."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, (3, 5, 5), stride=(1, 2, 2), padding=(1, 2, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
