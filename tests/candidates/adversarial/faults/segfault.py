"""Fault: dereferences a null pointer in forward (SIGSEGV); works with any problem's constructor."""
# harness-fault: status=crashed limit=120
import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)
        return inputs[0]
