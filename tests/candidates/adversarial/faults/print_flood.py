"""Fault: prints megabytes (8 MiB on the first call, 64 KiB on every later one) and is otherwise correct."""
# harness-fault: status=passed limit=300
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        line = "flood " + "x" * 1018 + "\n"
        sys.stdout.write(line * (8192 if self.calls == 1 else 64))
        return torch.relu(x)
