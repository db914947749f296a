# Estimate (H200, fp32): ~5 FLOPs/element; 4.29 GB moved (2.15 GB read + 2.15 GB written);
# memory-bound, ~1.07 ms eager at 4.0 TB/s. The row length is kept at 512 so outputs (~1e-3 to
# 3e-3 for U[0,1) inputs) stay well above the fp32 tolerance of 1e-4: an all-zero output fails.
import torch
import torch.nn as nn

batch_size = 1048576
dim = 512


class Model(nn.Module):
    """Softmax over the last dimension."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
