# Estimate (H200, fp32, no TF32): 64.4 GFLOP (q/k/v/out projections 38.7 G on 8 x 1024 tokens of
# width 768; q @ k^T and p @ v 25.8 G over 12 heads of 64); eager also moves the 403 MB score
# tensor ~6 times (~2.4 GB); ~1.3 ms of GEMM at 51 TFLOP/s + ~0.6 ms of traffic, ~1.9 ms eager.
import math

import torch
import torch.nn as nn

batch_size = 8
seq_len = 1024
embed_dim = 768
num_heads = 12


class Model(nn.Module):
    """Multi-head self-attention written out: q/k/v Linear, softmax(q @ k^T * scale) @ v, out Linear."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = t.shape
        return t.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, embed = x.shape
        q = self._heads(self.q_proj(x))
        k = self._heads(self.k_proj(x))
        v = self._heads(self.v_proj(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        weights = torch.softmax(scores, dim=-1)
        context = torch.matmul(weights, v).transpose(1, 2).reshape(batch, seq, embed)
        return self.out_proj(context)


def get_inputs():
    # U[-3, 3) gives attention logits a row std of ~1 with nn.Linear's default init (peak weight
    # ~0.2); plain U[0, 1) gives ~0.05, a nearly uniform softmax that a shortcut could pass.
    x = torch.rand(batch_size, seq_len, embed_dim) * 6.0 - 3.0
    return [x]


def get_init_inputs():
    return [embed_dim, num_heads]
