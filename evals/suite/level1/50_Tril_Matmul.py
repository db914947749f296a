# Estimate (H200, fp32): 137 GFLOP (4096^3 x 2) at 51 TFLOP/s without TF32 ~2.7 ms, then the
# lower-triangle mask over the 67 MB product (~0.03 ms). Eager computes the product and masks it
# in a second kernel, as we do (cuBLASLt then our triangle-mask copy).
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    """Lower-triangular part (below the first superdiagonal) of a product of two square matrices."""

    def __init__(self, diagonal: int = 0):
        super().__init__()
        self.diagonal = diagonal

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.tril(torch.matmul(A, B), diagonal=self.diagonal)


def get_inputs():
    return [torch.rand(N, N) * 2 - 1, torch.rand(N, N) * 2 - 1]


def get_init_inputs():
    return [0]
