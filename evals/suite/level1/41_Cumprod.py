# Estimate (H200, fp32): 0.54 GFLOP; 4.29 GB moved (2.15 GB read + 2.15 GB written); memory-bound,
# ~1.07 ms eager at 4.0 TB/s. Inputs are drawn in [0.99, 1.01) so the running products of 4096
# factors stay near 1 (a random walk of log-std ~0.4) instead of underflowing to zero: a
# degenerate all-zero output would pass on U[0, 1) inputs.
import torch
import torch.nn as nn

batch_size = 131072
dim = 4096


class Model(nn.Module):
    """Inclusive prefix product along dim 1."""

    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=self.dim)


def get_inputs():
    return [torch.rand(batch_size, dim).mul_(0.02).add_(0.99)]


def get_init_inputs():
    return [1]
