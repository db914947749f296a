# Estimate (H200, fp32): 34.4 GFLOP (2 * 32 * 512 * 64 * 64 * 256); 403 MB moved (134 MB input,
# 268 MB output); a GEMM in disguise, ~0.9-1.7 ms eager.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 256
out_channels = 512
height = 64
width = 64


class Model(nn.Module):
    """Pointwise (1x1) 2-D convolution without bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
