"""Fault: a forward that never returns (a Python loop)."""
# harness-fault: status=timeout limit=30
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        while True:
            pass
