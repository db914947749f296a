# Estimate (H200, fp32): ~1.6 GFLOP; reads anchor, positive and negative once (1.61 GB) into two row
# reductions and a mean: ~0.4 ms at 4.0 TB/s when fused. Eager computes each pairwise distance as
# a subtraction, an add of eps and a norm kernel (~4.8 GB moved), ~1.3 ms.
# The anchors are drawn closer to the positives than to the negatives (positive = anchor + small
# noise), so the hinge is active for some rows and not for others.
import torch
import torch.nn as nn

batch_size = 16384
dim = 8192
margin = 1.0


class Model(nn.Module):
    """Triplet margin loss (p = 2, mean over the batch), as nn.TripletMarginLoss."""

    def __init__(self, margin: float):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return self.loss(anchor, positive, negative)


def get_inputs():
    anchor = torch.rand(batch_size, dim)
    positive = torch.rand(batch_size, dim).mul_(0.02).add_(anchor)
    negative = torch.rand(batch_size, dim).mul_(0.02).add_(anchor)
    negative[: batch_size // 2].add_(0.03)  # far negatives: their hinge is inactive
    return [anchor, positive, negative]


def get_init_inputs():
    return [margin]
