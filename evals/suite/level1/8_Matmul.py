# Estimate (H200, fp32, no TF32): 137 GFLOP (2 * 4096^3); 201 MB moved (2 inputs + output);
# compute-bound, ~2.7 ms eager at 51 TFLOP/s.
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    """Square matrix multiplication C = A @ B."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    a = torch.rand(N, N)
    b = torch.rand(N, N)
    return [a, b]


def get_init_inputs():
    return []
