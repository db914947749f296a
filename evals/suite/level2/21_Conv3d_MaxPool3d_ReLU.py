import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
depth = 32
height = 64
width = 64


class Model(nn.Module):
    """Conv3d, then 2x2x2 max pooling with a ReLU and a scale fused after it."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size=3, padding=1)
        self.pool = nn.MaxPool3d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.pool(self.conv(x))) * 0.5


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return []
