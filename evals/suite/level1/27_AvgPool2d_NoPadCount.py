import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 512
width = 512


class Model(nn.Module):
    """2-D average pooling, 3x3 window, stride 2, padding 1, padding not counted in the divisor."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=3, stride=2, padding=1, count_include_pad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]


def get_init_inputs():
    return []
