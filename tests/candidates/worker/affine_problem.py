"""Reference for the worker tests: y = x * scale + bias (a KernelBench-format problem)."""
import torch
import torch.nn as nn

rows = 64
cols = 256


class Model(nn.Module):
    def __init__(self, scale: float, bias: float):
        super().__init__()
        self.scale = scale
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + self.bias


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return [2.0, 0.5]
