# Estimate (H200, fp32): ~20 FLOPs/element (erf), 4.29 GB moved (2.15 GB read + 2.15 GB written);
# memory-bound, ~1.07 ms eager at 4.0 TB/s.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 131072


class Model(nn.Module):
    """Applies the exact (erf-based) GELU elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs():
    # [-3, 3) covers the curved part of GELU on both sides of zero (in place: no 2 GiB temporary).
    x = torch.rand(batch_size, dim).mul_(6.0).sub_(3.0)
    return [x]


def get_init_inputs():
    return []
