# Estimate (H200, fp32): 0.54 G comparisons; 2.15 GB read + 8.4 MB written; memory-bound,
# ~0.54 ms eager at 4.0 TB/s (capped by the 2 GiB input limit). The reduced dimension is the
# middle one (strided access); with 256 values per output the maxima vary (about 0.94-1.0), so a
# constant output fails.
import torch
import torch.nn as nn

batch_size = 128
reduce_dim = 256
dim = 16384


class Model(nn.Module):
    """Max over dimension 1 of a 3-D tensor, values only (torch.amax)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=1)


def get_inputs():
    x = torch.rand(batch_size, reduce_dim, dim)
    return [x]


def get_init_inputs():
    return []
