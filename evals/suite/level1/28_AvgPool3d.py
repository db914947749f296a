import torch
import torch.nn as nn

batch_size = 16
channels = 32
depth = 64
height = 64
width = 64


class Model(nn.Module):
    """3-D average pooling, 3x3x3 window, stride 2, padding 1 (padding counted)."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool3d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.rand(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
