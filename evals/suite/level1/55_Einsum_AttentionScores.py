# Estimate (H200, fp32): 34.4 GFLOP (2 * 16 * 16 * 1024 * 1024 * 64); reads q and k (0.27 GB) and
# writes the 1.07 GB of scores: ~0.7 ms of fp32 math at 51 TFLOP/s plus ~0.3 ms of stores.
# The einsum contracts the last dim of both operands: one batched GEMM with k read transposed.
import torch
import torch.nn as nn

batch_size = 16
heads = 16
seq_len = 1024
head_dim = 64


class Model(nn.Module):
    """Attention scores written as an einsum: s[b, h, q, k] = sum_d q[b, h, q, d] k[b, h, k, d]."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bhqd,bhkd->bhqk", q, k)


def get_inputs():
    return [
        torch.rand(batch_size, heads, seq_len, head_dim).sub_(0.5),
        torch.rand(batch_size, heads, seq_len, head_dim).sub_(0.5),
    ]


def get_init_inputs():
    return []
