# Estimate (H200, fp32): ~1.6 GFLOP (an exp and two adds per element); 2.15 GB read + 0.26 MB
# written by one online pass, ~0.54 ms at 4.0 TB/s (capped by the 2 GiB input limit). Eager makes
# an amax pass, then materialises x - max and its exp before summing: ~8.6 GB moved, ~2.2 ms.
# Inputs are drawn from U[-4, 4) so each row's sum is dominated by its few largest terms.
import torch
import torch.nn as nn

batch_size = 65536
dim = 8192


class Model(nn.Module):
    """Numerically stable log(sum(exp(x))) over the last dimension, keeping it."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.rand(batch_size, dim).mul_(8.0).sub_(4.0)]


def get_init_inputs():
    return []
