"""Cheat: calls torch.matmul instead of writing a kernel (KernelBench's 'baseline kernel')."""
# harness-expect: problem=matmul static=suspicious strict=warning:pytorch_fallback kernelbench=passed
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)
