# Estimate (H200, fp32): 1.1 GFLOP; 4.29 GB moved (2.15 GB read + 2.15 GB written) with the
# subtraction fused into the scan's store; eager writes and re-reads the inclusive sums
# (~8.6 GB, ~2.1 ms at 4.0 TB/s).
import torch
import torch.nn as nn

batch_size = 65536
dim = 8192


class Model(nn.Module):
    """Exclusive prefix sum along dim 1 (element i is the sum of the elements before it)."""

    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.dim) - x


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [1]
