# Estimate (H200, fp32): 48.9 GFLOP (2 * 8 * 64 * 24 * 48 * 48 * 32 * 27: each input element meets
# 32 output channels x 27 taps); 1.02 GB moved (113 MB input, 906 MB output); ~1.5-3 ms eager.
import torch
import torch.nn as nn

batch_size = 8
in_channels = 64
out_channels = 64
groups = 2
depth = 24
height = 48
width = 48


class Model(nn.Module):
    """Transposed 3-D convolution, 2 groups, 3x3x3 kernel, stride 2, padding 1, output_padding 1: 2x upsampling."""

    def __init__(self, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(
            in_channels, out_channels, 3, stride=2, padding=1, output_padding=1, groups=groups
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, groups]
