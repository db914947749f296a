# Estimate (H200, fp32): ~8 GFLOP, most in the diagonal-block einsum (per chunk: (l x n) @ (n x s),
# then (l x s) @ (s x p), batched over batch x chunks x heads); 0.34 GB of inputs, weights and output,
# ~3.7 GB moved by the ops one at a time.
# Eager plans each einsum with permutes and bmm and runs ~40 kernels: ~1.5-3 ms.
# Mamba2's chunked state-space duality (SSD) scan, as KernelBench's level3/48 writes it (einops
# rearranges, a segment sum masked by a triangle of ones, four-operand einsums, a pad), at a batch
# that fits the input cap. A is drawn small so the decays exp(segsum) neither vanish nor explode.
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

batch_size = 256
seq_length = 256
n_heads = 8
d_head = 64
d_state = 16
block_len = 64


class Model(nn.Module):
    """SSD: Y = diag-block outputs + state-passing outputs, chunked by block_len."""

    def __init__(
        self, batch_size: int, seq_length: int, n_heads: int, d_head: int, d_state: int, block_len: int
    ):
        super().__init__()
        self.block_len = block_len
        self.A = nn.Parameter(torch.randn(batch_size, seq_length, n_heads) * 0.05)
        self.B = nn.Parameter(torch.randn(batch_size, seq_length, n_heads, d_state) * 0.25)
        self.C = nn.Parameter(torch.randn(batch_size, seq_length, n_heads, d_state) * 0.25)

    def segsum(self, x: torch.Tensor) -> torch.Tensor:
        t = x.size(-1)
        x_cumsum = torch.cumsum(x, dim=-1)
        x_segsum = x_cumsum[..., :, None] - x_cumsum[..., None, :]
        mask = torch.tril(torch.ones(t, t, device=x.device, dtype=torch.bool), diagonal=0)
        return x_segsum.masked_fill(~mask, -torch.inf)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        X_blocks, A_blocks, B_blocks, C_blocks = [
            rearrange(x, "b (c l) ... -> b c l ...", l=self.block_len) for x in (X, self.A, self.B, self.C)
        ]
        A_blocks = rearrange(A_blocks, "b c l h -> b h c l")
        A_cumsum = torch.cumsum(A_blocks, dim=-1)
        L = torch.exp(self.segsum(A_blocks))
        Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C_blocks, B_blocks, L, X_blocks)
        decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B_blocks, decay_states, X_blocks)
        states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
        decay_chunk = torch.exp(self.segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
        states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)[:, :-1]
        Y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C_blocks, states, torch.exp(A_cumsum))
        return rearrange(Y_diag + Y_off, "b c l h p -> b (c l) h p")


def get_inputs():
    return [torch.rand(batch_size, seq_length, n_heads, d_head).sub_(0.5)]


def get_init_inputs():
    return [batch_size, seq_length, n_heads, d_head, d_state, block_len]
