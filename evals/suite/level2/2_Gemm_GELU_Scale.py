# Estimate (H200, fp32, no TF32): 137 GFLOP (2 * 8192 * 2048 * 4096); 235 MB moved (input,
# weight, output) by the fused form, ~0.8 GB by eager's three kernels; ~2.9 ms eager at
# 51 TFLOP/s plus two elementwise passes.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
in_features = 2048
out_features = 4096
scale = 2.5


class Model(nn.Module):
    """nn.Linear, exact GELU, then multiplication by a constant factor."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x)) * self.scale


def get_inputs():
    x = torch.rand(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, scale]
