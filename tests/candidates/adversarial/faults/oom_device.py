"""Fault: allocates device memory 4 GiB at a time until the allocator gives up."""
# harness-fault: status=runtime_error limit=180
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.hoard = []

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        while True:
            self.hoard.append(torch.empty(1 << 32, dtype=torch.uint8, device=inputs[0].device))
