"""Cheat: switches TF32 on for its own matmul (and, in a shared process, for the reference too)."""
# harness-expect: problem=matmul static=hacked strict=runtime_error kernelbench=runtime_error
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        torch.backends.cuda.matmul.allow_tf32 = True
        return torch.matmul(a, b)
