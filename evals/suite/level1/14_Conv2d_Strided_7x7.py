# Estimate (H200, fp32): 30.2 GFLOP (2 * 32 * 64 * 224 * 224 * 3 * 49); 488 MB moved (77 MB input,
# 411 MB output); a ResNet-style stem (3 input channels: little reuse), ~1.5-3 ms eager.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 3
out_channels = 64
height = 448
width = 448


class Model(nn.Module):
    """2-D convolution, 7x7 kernel, stride 2, padding 3 (an image-network stem): 448 -> 224."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 7, stride=2, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
