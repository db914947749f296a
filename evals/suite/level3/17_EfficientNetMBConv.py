# Estimate (H200, fp32): three EfficientNet MBConv blocks (1x1 expand x6, depthwise 3x3, squeeze-
# and-excitation with SiLU/sigmoid, 1x1 project, residual) on 16x40x56x56: ~6 GFLOP; eager
# ~2-3 ms, memory- and launch-bound (expanded activations of 77 MB, SE pooling per block).
import torch
import torch.nn as nn

batch_size = 16
channels = 40
size = 56


class MBConv(nn.Module):
    def __init__(self, channels: int, expand: int = 6, se_ratio: float = 0.25):
        super().__init__()
        hidden = channels * expand
        squeezed = max(1, int(channels * se_ratio))
        self.expand = nn.Sequential(nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.SiLU())
        self.depthwise = nn.Sequential(
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.SiLU()
        )
        self.se = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Conv2d(hidden, squeezed, 1), nn.SiLU(), nn.Conv2d(squeezed, hidden, 1), nn.Sigmoid()
        )
        self.project = nn.Sequential(nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.depthwise(self.expand(x))
        y = y * self.se(y)
        return x + self.project(y)


class Model(nn.Module):
    """Three MBConv blocks with identity shortcuts."""

    def __init__(self, channels: int):
        super().__init__()
        self.blocks = nn.Sequential(MBConv(channels), MBConv(channels), MBConv(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def get_inputs():
    return [torch.rand(batch_size, channels, size, size)]


def get_init_inputs():
    return [channels]
