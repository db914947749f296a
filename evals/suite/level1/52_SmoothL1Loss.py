# Estimate (H200, fp32): ~2.7 GFLOP; reads both inputs once (2.15 GB) into one mean: ~0.54 ms at
# 4.0 TB/s when fused (capped by the 2 GiB input limit). Eager materialises the difference, its
# absolute value and the piecewise loss before the mean: ~10 GB moved, ~2.5 ms.
# Predictions are drawn in [-1, 1) and targets in [0, 1), so |difference| falls on both sides of beta.
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 16384
cols = 16384
beta = 0.5


class Model(nn.Module):
    """Smooth L1 (Huber-style) loss with beta = 0.5, averaged over every element."""

    def __init__(self, beta: float):
        super().__init__()
        self.beta = beta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(predictions, targets, beta=self.beta)


def get_inputs():
    return [torch.rand(rows, cols).mul_(2.0).sub_(1.0), torch.rand(rows, cols)]


def get_init_inputs():
    return [beta]
