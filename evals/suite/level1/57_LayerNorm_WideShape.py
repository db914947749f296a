# Estimate (H200, fp32): ~8 FLOPs/element; 16 rows of 4.19M elements (the normalised shape is
# (64, 256, 256)): 268 MB read + 268 MB written, plus 33.5 MB of weight and bias; memory-bound,
# ~0.14 ms at 4.0 TB/s for one read, ~0.2 ms for the two reads exact statistics need. Sixteen rows
# give one block per row sixteen blocks: the rows must be split over the GPU.
import torch
import torch.nn as nn

batch_size = 16
features = 64
dim1 = 256
dim2 = 256


class Model(nn.Module):
    """LayerNorm over the last three dimensions (a normalised shape of millions of elements)."""

    def __init__(self, normalized_shape: tuple[int, ...]):
        super().__init__()
        self.norm = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [(features, dim1, dim2)]
