# Estimate (H200, fp32): 6 dense layers (BN-ReLU-conv1x1 to 128, BN-ReLU-conv3x3 to 32 growth) on
# 16x64x56x56 growing to 256 channels, then a transition (BN-ReLU-conv1x1 to 128, avg-pool 2x2):
# ~25 GFLOP; eager ~2-3 ms (cuDNN plus ~20 BN/ReLU passes and the growing concatenations).
import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
growth = 32
layers = 6
size = 56


class DenseLayer(nn.Module):
    def __init__(self, inp: int, growth: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(inp)
        self.conv1 = nn.Conv2d(inp, 4 * growth, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv1(torch.relu(self.bn1(x)))
        return self.conv2(torch.relu(self.bn2(y)))


class Model(nn.Module):
    """DenseNet block: each layer sees the concatenation of all earlier outputs; then a transition."""

    def __init__(self, in_channels: int, growth: int, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(in_channels + i * growth, growth) for i in range(layers))
        total = in_channels + layers * growth
        self.bn = nn.BatchNorm2d(total)
        self.transition = nn.Conv2d(total, total // 2, 1, bias=False)
        self.pool = nn.AvgPool2d(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        x = torch.cat(features, 1)
        return self.pool(self.transition(torch.relu(self.bn(x))))


def get_inputs():
    return [torch.rand(batch_size, in_channels, size, size)]


def get_init_inputs():
    return [in_channels, growth, layers]
