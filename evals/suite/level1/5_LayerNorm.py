# Estimate (H200, fp32): ~8 FLOPs/element; 4.29 GB moved (2.15 GB read + 2.15 GB written, the
# 32 KB of weight and bias are negligible); memory-bound, ~1.07 ms eager at 4.0 TB/s.
import torch
import torch.nn as nn

batch_size = 64
seq_len = 2048
hidden = 4096


class Model(nn.Module):
    """LayerNorm over the last dimension with elementwise affine weight and bias."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    x = torch.rand(batch_size, seq_len, hidden)
    return [x]


def get_init_inputs():
    return [hidden]
