import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128


class Model(nn.Module):
    """Conv2d, GroupNorm (16 groups) and SiLU fused into the normalising pass."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.gn = nn.GroupNorm(16, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.gn(self.conv(x)))


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return []
