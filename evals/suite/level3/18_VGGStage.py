# Estimate (H200, fp32): the first three VGG-16 stages on 8x3x224x224 (conv3x3+ReLU x2 at 64 and
# 128 channels, x3 at 256, max-pool after each stage): ~8 x 9.2 = ~74 GFLOP; eager ~3-5 ms,
# compute-bound (cuDNN), plus ReLU and pooling passes over 100-200 MB activations.
import torch
import torch.nn as nn

batch_size = 8


class Model(nn.Module):
    """VGG-16's first three stages: convolutions with bias and ReLU, max-pool between stages."""

    def __init__(self):
        super().__init__()
        layers: list[nn.Module] = []
        inp = 3
        for width, repeats in ((64, 2), (128, 2), (256, 3)):
            for _ in range(repeats):
                layers += [nn.Conv2d(inp, width, 3, padding=1), nn.ReLU(inplace=True)]
                inp = width
            layers.append(nn.MaxPool2d(2, 2))
        self.features = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)


def get_inputs():
    return [torch.rand(batch_size, 3, 224, 224)]


def get_init_inputs():
    return []
