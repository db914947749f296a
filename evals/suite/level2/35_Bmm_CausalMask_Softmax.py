# Estimate (H200, fp32): 34.4 GFLOP (256 x 1024^2 x 64 x 2) ~0.7 ms; the 1.07 GB score tensor is
# written once by cuBLASLt and read once by the softmax, whose load applies the causal mask
# (~0.55 ms at 4.0 TB/s). Eager also writes the bool mask comparison and the filled scores
# (~2.7 GB more).
import math

import torch
import torch.nn as nn

batch_heads = 256
seq = 1024
head_dim = 64


class Model(nn.Module):
    """Causal attention weights with MinGPT's explicit mask: a registered lower-triangular buffer."""

    def __init__(self, max_seq: int = 1024):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(max_seq, max_seq)).view(1, max_seq, max_seq))

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        t = q.size(1)
        att = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :t, :t] == 0, float("-inf"))
        return torch.softmax(att, dim=-1)


def get_inputs():
    return [torch.rand(batch_heads, seq, head_dim) * 6 - 3, torch.rand(batch_heads, seq, head_dim) * 6 - 3]


def get_init_inputs():
    return [seq]
