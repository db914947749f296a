# Estimate (H200, fp32): GoogLeNet-style inception module on 16x256x56x56: 1x1 (64), 1x1->3x3
# (96->128), 1x1->5x5 (16->32), 3x3 max-pool->1x1 (32), concatenated to 256 channels: ~23 GFLOP;
# eager ~1.5-2.5 ms (four branches launched one after another, plus the concatenation copy).
import torch
import torch.nn as nn

batch_size = 16
in_channels = 256
size = 56


class Model(nn.Module):
    """Inception module: four parallel branches concatenated along channels."""

    def __init__(self, in_channels: int):
        super().__init__()
        self.b1 = nn.Conv2d(in_channels, 64, 1)
        self.b3 = nn.Sequential(nn.Conv2d(in_channels, 96, 1), nn.ReLU(), nn.Conv2d(96, 128, 3, padding=1))
        self.b5 = nn.Sequential(nn.Conv2d(in_channels, 16, 1), nn.ReLU(), nn.Conv2d(16, 32, 5, padding=2))
        self.bp = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), nn.Conv2d(in_channels, 32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], dim=1)
        return torch.relu(out)


def get_inputs():
    return [torch.rand(batch_size, in_channels, size, size)]


def get_init_inputs():
    return [in_channels]
