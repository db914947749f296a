import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128


class Model(nn.Module):
    """Conv2d, training-mode BatchNorm2d, ReLU and a global average pool (a classifier head's input)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(out_channels)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.pool(torch.relu(self.bn(self.conv(x)))), 1)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return []
