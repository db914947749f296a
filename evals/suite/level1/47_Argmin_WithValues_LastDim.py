# Estimate (H200, fp32): 0.54 G comparisons; 2.15 GB read + 0.39 MB written (values and int64
# indices); memory-bound, ~0.54 ms eager at 4.0 TB/s (capped by the 2 GiB input limit). One
# kernel writes both results of torch.min(x, dim); the minima of 16384 values are ~6e-5 apart
# from 0, so the indices (not the values) carry most of the signal.
import torch
import torch.nn as nn

batch_size = 32768
dim = 16384


class Model(nn.Module):
    """Minimum and its index along the last dimension (torch.min(x, dim) with both results used)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = torch.min(x, dim=-1)
        return values, indices


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
