import torch
import torch.nn as nn

batch_size = 16
features = 64
dim1 = 256
dim2 = 256


class Model(nn.Module):
    """Instance normalisation (input statistics per sample and channel, no affine)."""

    def __init__(self, num_features: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inorm(x)


def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
