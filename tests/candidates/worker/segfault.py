"""Candidate whose forward dereferences a null pointer."""
import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float, bias: float):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)
        return x
