# Estimate (H200, fp32): 38.7 GFLOP (2 * 16 * 256 * 128 * 128 * 32 * 9); 537 MB moved by the fused form,
# ~1.6 GB by eager (conv out, BN statistics and normalise, SiLU); ~1.6-3.2 ms eager.
# The convolution has no bias: the batch-statistics BatchNorm's mean subtraction would cancel it.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
channels = 256
groups = 8
height = 128
width = 128


class Model(nn.Module):
    """Grouped Conv2d (8 groups, 3x3, no bias), BatchNorm2d in training mode (batch statistics), SiLU."""

    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.bn(self.conv(x)))


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels, groups]
