# Estimate (H200, fp32): 35.6 GFLOP (depthwise 2 * 32 * 128 * 128 * 128 * 9 = 1.2 G, pointwise
# 2 * 32 * 256 * 128 * 128 * 128 = 34.4 G); ~1.3 GB moved (the 268 MB depthwise output written and read);
# ~1.2-2.2 ms eager.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 256
height = 128
width = 128


class Model(nn.Module):
    """A MobileNet separable block: depthwise 3x3 convolution, pointwise 1x1 convolution, ReLU6."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, 3, padding=1, groups=in_channels)
        self.pointwise = nn.Conv2d(in_channels, out_channels, 1)
        self.act = nn.ReLU6()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.pointwise(self.depthwise(x)))


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width) * 2 - 1
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
