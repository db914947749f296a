# Estimate (H200, fp32): ~25 FLOPs/element; 4.29 GB moved by the fused form (2.15 GB read,
# 2.15 GB written), ~17 GB by eager's four kernels; ~1.07 ms fused, ~4.3 ms eager at 4.0 TB/s.
# Scale, bias and clamp bounds are chosen so both clamps bite on part of the data (about a third
# of the values hit the upper bound, a few channels the lower one) and the rest stays in tanh's
# curved range.
import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 512
width = 512
scale = 1.5
clamp_min = -0.5
clamp_max = 0.75


class Model(nn.Module):
    """clamp(tanh(x * scale + bias), clamp_min, clamp_max) with a learned per-channel bias."""

    def __init__(self, channels: int, scale: float, clamp_min: float, clamp_max: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.5)
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x * self.scale + self.bias)
        return torch.clamp(y, self.clamp_min, self.clamp_max)


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels, scale, clamp_min, clamp_max]
