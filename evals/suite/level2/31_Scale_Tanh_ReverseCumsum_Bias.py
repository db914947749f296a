# Estimate (H200, fp32): ~3.2 GFLOP; 2.15 GB moved (1.07 GB read + 1.07 GB written) fused: the
# scale and tanh run on the scan's load, the flips become a backwards walk, the bias add runs on
# its store. Eager makes six passes (~6.4 GB, ~1.6 ms at 4.0 TB/s).
import torch
import torch.nn as nn

batch_size = 8192
dim = 32768


class Model(nn.Module):
    """tanh(x * s), suffix sums along the last dim (flip-cumsum-flip), plus a per-column bias."""

    def __init__(self, dim: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(dim) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.tanh(x * self.scale)
        s = torch.cumsum(t.flip(-1), dim=-1).flip(-1)
        return s + self.bias


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [dim, 1.5]
