# Estimate (H200, fp32, no TF32): 137 GFLOP (2 * 4096 * 4096 * 4096); 201 MB moved (input,
# weight, output); compute-bound, ~2.7 ms eager at 51 TFLOP/s (the bias and ReLU add ~0.1 ms).
import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 4096


class Model(nn.Module):
    """nn.Linear (GEMM plus bias) followed by ReLU."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    x = torch.rand(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
