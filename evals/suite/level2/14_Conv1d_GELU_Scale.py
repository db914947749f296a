# Estimate (H200, fp32): 42.9 GFLOP (2 * 32 * 128 * 16384 * 64 * 5); 403 MB moved by the fused form,
# ~0.9 GB by eager; ~1.2-2.3 ms eager.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
length = 16384
scale = 0.5


class Model(nn.Module):
    """Conv1d (kernel 5, same length), tanh-approximated GELU, then a constant scale."""

    def __init__(self, in_channels: int, out_channels: int, scale: float):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, 5, padding=2)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.conv(x), approximate="tanh") * self.scale


def get_inputs():
    x = torch.rand(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, scale]
