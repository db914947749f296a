# Estimate (H200, fp32): 0.6 G comparisons; 2.68 GB moved (2.15 GB read + 0.54 GB written);
# memory-bound, ~0.67 ms eager at 4.0 TB/s (capped by the 2 GiB input limit).
import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 512
width = 512
kernel_size = 3
stride = 2
padding = 1


class Model(nn.Module):
    """2-D max pooling, 3x3 window, stride 2, padding 1 (overlapping windows, as in a ResNet stem)."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]
