# Estimate (H200, fp32): 42.9 GFLOP (2 * 32 * 128 * 16384 * 64 * 5); 403 MB moved (134 MB input,
# 268 MB output); compute-bound, ~1.1-2.1 ms eager with cuDNN at 20-40 TFLOP/s.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
length = 16384
kernel_size = 5


class Model(nn.Module):
    """1-D convolution, kernel 5, stride 1, padding 2 (same length), with bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
