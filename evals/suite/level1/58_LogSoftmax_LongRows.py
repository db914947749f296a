# Estimate (H200, fp32): ~6 FLOPs/element; 4096 rows of 65536: 1.07 GB read + 1.07 GB written;
# memory-bound, ~0.54 ms at 4.0 TB/s for one read, ~0.8 ms for the two reads a row too long for
# shared memory needs. Log-softmax keeps every output far above the fp32 tolerance (about -11).
import torch
import torch.nn as nn

batch_size = 4096
dim = 65536


class Model(nn.Module):
    """Log-softmax over long rows (each row is 256 KB: more than a block's shared memory)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
