# Estimate (H200, fp32, no TF32): 68.7 GFLOP (two GEMMs 2 * 4096 tokens * 1024 * 4096); ~0.4 GB
# moved by eager (34 MB of weights, the 67 MB hidden activation written and read three times);
# ~1.35 ms of GEMM at 51 TFLOP/s, ~1.5 ms eager.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 512
embed_dim = 1024
hidden_dim = 4096


class Model(nn.Module):
    """Pre-norm transformer MLP block: x + fc2(gelu(fc1(layernorm(x)))), exact GELU."""

    def __init__(self, embed_dim: int, hidden_dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def get_inputs():
    x = torch.rand(batch_size, seq_len, embed_dim)
    return [x]


def get_init_inputs():
    return [embed_dim, hidden_dim]
