# Estimate (H200, fp32): 34.4 GFLOP (2 * 32 * 128 * 8192 * 128 * 4); 403 MB moved (134 MB input,
# 268 MB output); ~1.0-2.0 ms eager (cuDNN's backward-data convolution).
import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 128
length = 8192


class Model(nn.Module):
    """Transposed 1-D convolution, kernel 4, stride 2, padding 1: length 8192 -> 16384, with bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, 4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
