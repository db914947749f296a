# Estimate (H200, fp32): 43.5 GFLOP (2 * 16 * 128 * 96 * 96 * 128 * 9); 226 MB moved by the fused form
# (two 75 MB inputs, 75 MB output); a residual join, ~1.1-2.2 ms eager.
import torch
import torch.nn as nn

batch_size = 16
channels = 128
height = 96
width = 96


class Model(nn.Module):
    """relu(conv(x) + skip): a 3x3 convolution joined with a residual input, then ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + skip)


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    skip = torch.rand(batch_size, channels, height, width) * 2 - 1
    return [x, skip]


def get_init_inputs():
    return [channels]
