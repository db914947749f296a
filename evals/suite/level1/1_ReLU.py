# Estimate (H200, fp32): 0.54 G ops (one max per element); 4.29 GB moved (2.15 GB read + 2.15 GB written);
# memory-bound, ~1.07 ms eager at 4.0 TB/s.
import torch
import torch.nn as nn

batch_size = 16384
dim = 32768


class Model(nn.Module):
    """Applies ReLU elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    # Shift to [-0.5, 0.5) so about half the elements are clamped (torch.rand alone is all >= 0,
    # which would make ReLU the identity).
    x = torch.rand(batch_size, dim).sub_(0.5)
    return [x]


def get_init_inputs():
    return []
