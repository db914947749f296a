# Estimate (H200, fp32, no TF32): 68.7 GFLOP (2 * 32768 * 1024 * 1024); 272 MB moved by the
# fused form (a, b, output), ~0.8 GB by eager's three kernels; ~1.5 ms eager at 51 TFLOP/s plus
# the scale and softmax passes. The scale spreads the logits (row std ~0.5) so the softmax is
# neither uniform nor one-hot; outputs ~1e-3 stay well above the 1e-4 tolerance.
import torch
import torch.nn as nn

M = 32768
K = 1024
N = 1024
scale = 0.1


class Model(nn.Module):
    """C = softmax((A @ B) * scale, dim=-1) for two input matrices."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.matmul(a, b) * self.scale, dim=-1)


def get_inputs():
    a = torch.rand(M, K)
    b = torch.rand(K, N)
    return [a, b]


def get_init_inputs():
    return [scale]
