# Estimate (H200, fp32): 43.5 GFLOP (2 * 16 * 64 * 192 * 192 * 64 * 9); 302 MB moved (151 MB input,
# 151 MB output); compute-bound, ~1.1-2.2 ms eager with cuDNN at 20-40 TFLOP/s.
import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 192
width = 192
dilation = 2


class Model(nn.Module):
    """2-D convolution, 3x3 kernel, dilation 2, padding 2 (same size), no bias."""

    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels, dilation]
