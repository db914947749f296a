# Estimate (H200, fp32): ~0.1 GFLOP; 1.07 GB moved at least (x and skip read, output written:
# 2 x 268 MB + 537 MB), ~0.27 ms at 4.0 TB/s. Eager copies the shuffled view, concatenates and then
# applies ReLU (~2.1 GB, ~0.55 ms); ours gathers the shuffle in one kernel and fuses ReLU into the
# concatenation's store.
import torch
import torch.nn as nn

batch_size = 32
channels = 120
groups = 3
height = 128
width = 128


class Model(nn.Module):
    """ShuffleNet-style channel shuffle of one branch, joined with a skip branch, then ReLU."""

    def __init__(self, groups: int = 3):
        super().__init__()
        self.groups = groups

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.size()
        x = x.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous()
        x = x.view(n, c, h, w)
        return torch.relu(torch.cat([x, skip], dim=1))


def get_inputs():
    return [
        torch.rand(batch_size, channels, height, width) * 2 - 1,
        torch.rand(batch_size, channels, height, width) * 2 - 1,
    ]


def get_init_inputs():
    return [groups]
