"""Synthetic problem for profiling evidence: a scaled transpose, y = 2 * x^T (8192 x 8192, fp32).

Profiled together with bad_kernels_candidate.py, whose kernels plant the bottlenecks the diagnosis
rules look for. Not part of the suite.
"""

import torch
import torch.nn as nn

N = 8192


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.t() * 2.0).contiguous()


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(N, N)]


def get_init_inputs() -> list[int]:
    return []
