"""Synthetic problem for profiling evidence: y = 2x + 1 on 4 MiB of fp32. Not part of the suite."""

import torch
import torch.nn as nn

N = 1 << 20


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(N)]


def get_init_inputs() -> list[int]:
    return []
