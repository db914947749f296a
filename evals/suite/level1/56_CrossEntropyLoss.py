# Estimate (H200, fp32): ~1.6 GFLOP (an exp and two adds per score); reads the 2.13 GB of scores
# once (plus 1 MB of targets) into a per-sample logsumexp and pick, then two small sums: ~0.54 ms
# at 4.0 TB/s (capped by the 2 GiB input limit). Eager runs log_softmax (a read and a write of the
# scores) and nll_loss: ~6.4 GB moved, ~1.6 ms.
# Scores are drawn in [-4, 4) so each sample's softmax is neither uniform nor one-hot; about one
# target in 64 is ignore_index, so 'mean' must divide by the samples that count.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 130048
num_classes = 4096


class Model(nn.Module):
    """Cross entropy over class-index targets (mean over the samples that count)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(predictions, targets)


def get_inputs():
    targets = torch.randint(0, num_classes, (batch_size,))
    targets[::64] = -100
    return [torch.rand(batch_size, num_classes).mul_(8.0).sub_(4.0), targets]


def get_init_inputs():
    return []
