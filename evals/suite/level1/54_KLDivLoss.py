# Estimate (H200, fp32): ~1.3 GFLOP; reads predictions and targets once (1.07 GB) into one sum:
# ~0.27 ms at 4.0 TB/s when the log, the xlogy and the products are fused into the reduction.
# Eager runs the log, then kl_div's xlogy, product and difference as separate kernels before the
# sum: ~5.4 GB moved, ~1.4 ms.
# Both inputs are rows of softmax probabilities (as KernelBench's KL problem draws them).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
classes = 16384


class Model(nn.Module):
    """KL divergence between two distributions, F.kl_div(log p, q, reduction='batchmean')."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


def get_inputs():
    return [torch.rand(batch_size, classes).softmax(dim=-1), torch.rand(batch_size, classes).softmax(dim=-1)]


def get_init_inputs():
    return []
