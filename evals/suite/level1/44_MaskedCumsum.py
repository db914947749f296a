# Estimate (H200, fp32): 0.27 GFLOP; 2.42 GB moved (1.07 GB x + 0.27 GB bool mask read, 1.07 GB
# written) with the mask applied on load; eager writes and re-reads x * mask (~4.6 GB, ~1.1 ms).
# x is 2^28 elements so x and the mask together stay under the suite's 2 GiB input cap.
import torch
import torch.nn as nn

batch_size = 16384
dim = 16384


class Model(nn.Module):
    """Prefix sum along dim 1 of the elements a boolean mask keeps."""

    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x * mask, dim=self.dim)


def get_inputs():
    x = torch.rand(batch_size, dim)
    mask = torch.randint(0, 2, (batch_size, dim)).bool()
    return [x, mask]


def get_init_inputs():
    return [1]
