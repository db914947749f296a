# Estimate (H200, fp32): two ShuffleNet units (grouped 1x1 conv, channel shuffle, depthwise 3x3,
# grouped 1x1 conv, residual add) on 32x240x56x56, 3 groups: ~5 GFLOP; eager ~1.5-2.5 ms,
# memory-bound (each activation 96 MB, about 14 passes).
import torch
import torch.nn as nn

batch_size = 32
channels = 240
groups = 3
size = 56


class ShuffleUnit(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        mid = channels // 4
        self.groups = groups
        self.conv1 = nn.Conv2d(channels, mid, 1, groups=groups, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, padding=1, groups=mid, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, channels, 1, groups=groups, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)

    def shuffle(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        return x.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous().view(n, c, h, w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(self.shuffle(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(x + y)


class Model(nn.Module):
    """Two ShuffleNet units in sequence."""

    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.units = nn.Sequential(ShuffleUnit(channels, groups), ShuffleUnit(channels, groups))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.units(x)


def get_inputs():
    return [torch.rand(batch_size, channels, size, size)]


def get_init_inputs():
    return [channels, groups]
