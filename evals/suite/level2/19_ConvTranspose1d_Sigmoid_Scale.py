# Estimate (H200, fp32): 34.4 GFLOP (2 * 32 * 256 * 8192 * 64 * 4); 403 MB moved by the fused form
# (268 MB input, 134 MB output), ~0.7 GB by eager; ~1.0-2.0 ms eager.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 256
out_channels = 64
length = 8192


class Model(nn.Module):
    """ConvTranspose1d (kernel 4, stride 2, padding 1), sigmoid, then a learned per-channel scale."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, 4, stride=2, padding=1)
        self.scale = nn.Parameter(torch.rand(out_channels, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.conv(x)) * self.scale


def get_inputs():
    x = torch.rand(batch_size, in_channels, length) * 2 - 1
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
