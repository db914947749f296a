# Estimate (H200, fp32): ~10 FLOPs/element; 3.22 GB moved by the fused form (two 1.07 GB inputs
# read, 1.07 GB written), 5.4 GB by eager (the sum is written and read back); ~0.8 ms fused,
# ~1.3 ms eager at 4.0 TB/s (the two inputs together are capped at 2 GiB).
import torch
import torch.nn as nn

batch_size = 32
seq_len = 2048
hidden = 4096


class Model(nn.Module):
    """LayerNorm(x + residual) over the last dimension, with elementwise affine weight and bias."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual)


def get_inputs():
    x = torch.rand(batch_size, seq_len, hidden)
    residual = torch.rand(batch_size, seq_len, hidden)
    return [x, residual]


def get_init_inputs():
    return [hidden]
