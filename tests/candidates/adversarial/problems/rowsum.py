"""Sum over the last dimension (keepdim): a reduction, where summation order may differ."""
import torch
import torch.nn as nn

batch_size = 1024
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
