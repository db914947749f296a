# Estimate (H200, fp32): 34.4 GFLOP (2 * 8 * 128 * 128 * 128 * 64 * 4 * 4); 201 MB moved (67 MB input,
# 134 MB output); ~1.0-2.0 ms eager (cuDNN's backward-data convolution).
import torch
import torch.nn as nn

batch_size = 8
in_channels = 128
out_channels = 64
height = 128
width = 128


class Model(nn.Module):
    """Transposed 2-D convolution, 4x4 kernel, stride 2, padding 1 (2x upsampling), with bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
