# Estimate (H200, fp32): 40.4 GFLOP (2 * 8 * 96 * 161 * 227 * 48 * 5 * 3); 168 MB moved (56 MB input,
# 112 MB output); odd sizes (161 x 227), ~1.0-2.0 ms eager.
import torch
import torch.nn as nn

batch_size = 8
in_channels = 48
out_channels = 96
height = 161
width = 227


class Model(nn.Module):
    """2-D convolution with padding='same', a 5x3 kernel and dilation (1, 2) on odd-sized input."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, (5, 3), padding="same", dilation=(1, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
