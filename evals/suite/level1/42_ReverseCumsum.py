# Estimate (H200, fp32): 0.54 GFLOP; 4.29 GB moved (2.15 GB read + 2.15 GB written) when the scan
# walks rows backwards; eager makes two flip copies as well (~3x the traffic, ~3.2 ms at 4.0 TB/s).
import torch
import torch.nn as nn

batch_size = 16384
dim = 32768


class Model(nn.Module):
    """Suffix sums along dim 1, spelled flip-cumsum-flip as KernelBench writes them."""

    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [1]
