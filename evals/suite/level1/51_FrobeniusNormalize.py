# Estimate (H200, fp32): ~1.1 GFLOP; x / ||x||_F reads x twice (the norm, then the division) and
# writes it once: 6.4 GB, ~1.6 ms at 4.0 TB/s (eager: the same two passes, norm kernel + div).
# x is drawn around zero so the output has both signs; every element is ~1e-5 of the norm's scale
# times sqrt(n), so outputs sit near 1e-5: well above zero, compared with KernelBench's tolerance
# relative to their own size.
import torch
import torch.nn as nn

rows = 16384
cols = 32768


class Model(nn.Module):
    """Divide a tensor by its Frobenius norm (torch.norm(x, p='fro'))."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.norm(x, p="fro")


def get_inputs():
    return [torch.rand(rows, cols).sub_(0.5)]


def get_init_inputs():
    return []
