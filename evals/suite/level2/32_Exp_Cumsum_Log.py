# Estimate (H200, fp32): ~1.6 GFLOP; 4.29 GB moved (2.15 GB read + 2.15 GB written) fused: exp on
# the scan's load, log on its store (a running log-sum-exp of inputs in [0, 1), where exp cannot
# overflow). Eager makes three passes (~12.9 GB, ~3.2 ms at 4.0 TB/s).
import torch
import torch.nn as nn

batch_size = 32768
dim = 16384


class Model(nn.Module):
    """log(cumsum(exp(x))) along dim 1."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.cumsum(torch.exp(x), dim=1))


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
