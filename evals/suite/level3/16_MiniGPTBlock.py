# Estimate (H200, fp32): one GPT block on 8x1024x768, 12 heads, causal mask written out (masked_fill
# with -inf from a lower-triangular buffer), MLP 3072 with tanh-GELU, pre-norm residuals:
# 8 x (4*1024*768^2*2 + 2*1024^2*768*2 + 2*1024*768*3072*2) = ~116 GFLOP; eager ~4-5 ms.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 1024
dim = 768
heads = 12


class Model(nn.Module):
    """Pre-norm transformer block with explicit causal self-attention and a GELU MLP."""

    def __init__(self, dim: int, heads: int, seq_len: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(seq_len, seq_len)).view(1, 1, seq_len, seq_len))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


def get_inputs():
    return [torch.rand(batch_size, seq_len, dim) * 2 - 1]


def get_init_inputs():
    return [dim, heads, seq_len]
