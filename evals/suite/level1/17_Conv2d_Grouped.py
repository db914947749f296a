# Estimate (H200, fp32): 38.7 GFLOP (2 * 16 * 256 * 128 * 128 * 32 * 9); 537 MB moved (268 MB input,
# 268 MB output); ~1.5-3 ms eager (grouped convolutions run below cuDNN's dense rate).
import torch
import torch.nn as nn

batch_size = 16
channels = 256
groups = 8
height = 128
width = 128


class Model(nn.Module):
    """Grouped 2-D convolution (8 groups of 32 channels), 3x3 kernel, padding 1, with bias."""

    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels, groups]
