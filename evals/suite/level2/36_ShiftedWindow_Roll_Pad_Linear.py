# Estimate (H200, fp32): 17.6 GFLOP (the projection: 32*64*64 rows x 256 x 256, x2); the rolls and
# the pad move ~0.5 GB: ~0.35 ms of GEMM plus ~0.15 ms of data movement at 4.0 TB/s. Eager runs two
# rolls and a pad as separate copies (each a read and a write of the activation).
# A Swin-style shifted window: the map is rolled by -shift, padded to a multiple of the window,
# projected, and rolled back; every element moves, so a program that skips a roll fails.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
size = 62
channels = 256
shift = 3
pad = 2


class Model(nn.Module):
    """roll(-shift) over (H, W), pad H and W at the end, a per-position Linear, roll(+shift) back."""

    def __init__(self, channels: int, shift: int, pad: int):
        super().__init__()
        self.shift = shift
        self.pad = pad
        self.proj = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (batch, H, W, channels)
        x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        x = F.pad(x, (0, 0, 0, self.pad, 0, self.pad))
        x = self.proj(x)
        return torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))


def get_inputs():
    return [torch.rand(batch_size, size, size, channels).sub_(0.5)]


def get_init_inputs():
    return [channels, shift, pad]
