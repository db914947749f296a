# Estimate (H200, fp32): 0.54 GFLOP; 2.15 GB read + 0.13 MB written; memory-bound, ~0.54 ms
# eager at 4.0 TB/s (a reduction reads its input once; 1 ms would need a 4 GB input, over the
# 2 GiB input cap of the suite).
import torch
import torch.nn as nn

batch_size = 32768
dim = 16384


class Model(nn.Module):
    """Sum over the last dimension, keeping it (output shape [batch_size, 1])."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1, keepdim=True)


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
