# Estimate (H200, fp32, no TF32): 68.7 GFLOP (2 * 8192 * 2048 * 2048); 84 MB moved by the fused
# form (input, weight; the output is 32 KB), ~0.3 GB by eager; ~1.4 ms eager at 51 TFLOP/s.
# Row sums are ~1024 and differ between rows by a few units, far above the tolerance
# (1e-4 + 1e-4 * 1024 ~ 0.1).
import torch
import torch.nn as nn

batch_size = 8192
in_features = 2048
out_features = 2048


class Model(nn.Module):
    """nn.Linear, sigmoid, then the sum over the features of each row (keepdim)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.linear(x)).sum(dim=1, keepdim=True)


def get_inputs():
    x = torch.rand(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
