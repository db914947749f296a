# Estimate (H200, fp32): 51.5 GFLOP (2 * 64 * 256 * 4096 * 128 * 3); 537 MB moved (268 MB input,
# 268 MB output); compute-bound, ~1.3-2.6 ms eager with cuDNN at 20-40 TFLOP/s.
import torch
import torch.nn as nn

batch_size = 64
in_channels = 128
out_channels = 256
length = 8192
kernel_size = 3
stride = 2
dilation = 4


class Model(nn.Module):
    """1-D convolution, kernel 3, stride 2, dilation 4, padding 4: length 8192 -> 4096."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=dilation, dilation=dilation
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, dilation]
