# Estimate (H200, fp32): 38.7 GFLOP (2 * 32 * 64 * 128 * 128 * 64 * 9); 268 MB moved by the fused
# form's minimum (134 MB input, 134 MB output), ~0.67 GB by eager (conv out, softmax in and out);
# ~1.1-2.1 ms eager. The softmax runs over the channel dim (dim 1), not the last: each of the
# 32 x 128 x 128 pixels normalises its 64 channels, read with the pixels adjacent in memory. The
# logits' spread (std ~0.3 from the default init on U[0, 1) inputs) keeps outputs ~1/64 +- 30%.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 64
height = 128
width = 128


class Model(nn.Module):
    """Conv2d (3x3, same padding, bias), then softmax over the channels."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.conv(x), dim=1)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
