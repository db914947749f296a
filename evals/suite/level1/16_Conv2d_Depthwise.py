# Estimate (H200, fp32): 4.8 GFLOP (2 * 64 * 256 * 128 * 128 * 9); 2.15 GB moved (1.07 GB input,
# 1.07 GB output); memory-bound, ~0.5 ms at the copy ceiling, ~1 ms eager.
import torch
import torch.nn as nn

batch_size = 64
channels = 256
height = 128
width = 128


class Model(nn.Module):
    """Depthwise 2-D convolution (groups = channels), 3x3 kernel, padding 1, with bias."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels]
