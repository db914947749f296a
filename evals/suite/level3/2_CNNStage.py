# Estimate (H200, fp32): 44.4 GFLOP (conv1 64->128: 14.8 G, conv2 128->128: 29.6 G, 3x3 on
# 8 x 112 x 112); ~0.6 GB moved by eager (51 MB per 128-channel activation, ~12 passes);
# ~1.3-2.4 ms eager (cuDNN at 20-40 TFLOP/s plus ~0.15 ms of BN, ReLU and pooling passes).
# Convolutions have no bias (each feeds a batch-statistics BatchNorm, which would cancel it).
import torch
import torch.nn as nn

batch_size = 8
in_channels = 64
out_channels = 128
height = 112
width = 112


class Model(nn.Module):
    """A CNN stage: (Conv3x3 -> BatchNorm -> ReLU) twice, then 2x2 max pooling."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.pool(x)


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
