# Estimate (H200, fp32): 64.4 GFLOP (2 * 8 * 128 * 256 * 128 * 64 * 3 * 5); 201 MB moved (67 MB input,
# 134 MB output); compute-bound, ~1.6-3.2 ms eager with cuDNN at 20-40 TFLOP/s.
import torch
import torch.nn as nn

batch_size = 8
in_channels = 64
out_channels = 128
height = 256
width = 128
kernel_size = (3, 5)


class Model(nn.Module):
    """2-D convolution with an asymmetric 3x5 kernel on a non-square input, padding (1, 2): same size."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple[int, int]):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, kernel_size, padding=(kernel_size[0] // 2, kernel_size[1] // 2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
