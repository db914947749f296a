"""Synthetic candidate with planted program-level bottlenecks: profiling evidence, not a solution.

One forward reads a scalar back (.item(): a device-to-host copy and a stream synchronise), computes
on the CPU copy of its input (.cpu(): 4 MiB device-to-host), copies the result back (4 MiB
host-to-device from pageable memory), synchronises the device explicitly, and finishes with 24 tiny
kernels that leave the GPU idle between launches.
"""

import torch
import torch.nn as nn

TINY_KERNELS = 24


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        peak = float(x.abs().max().item())
        host = x.cpu()
        out = (host * 2.0 + 1.0).to(x.device)
        torch.cuda.synchronize(x.device)
        for _ in range(TINY_KERNELS):
            out = out * (peak / peak)
        return out
