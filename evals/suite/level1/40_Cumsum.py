# Estimate (H200, fp32): 0.54 GFLOP; 4.29 GB moved (2.15 GB read + 2.15 GB written); memory-bound,
# ~1.07 ms eager at 4.0 TB/s. Rows of 16384 are long enough for the multi-tile scan (look-back
# between 4096-element tiles of one row); the running sums reach ~8192, far above the tolerance.
import torch
import torch.nn as nn

batch_size = 32768
dim = 16384


class Model(nn.Module):
    """Inclusive prefix sum along dim 1."""

    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [1]
