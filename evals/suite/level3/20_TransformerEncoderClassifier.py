# Estimate (H200, fp32): nn.TransformerEncoder, 4 post-norm layers (ReLU FFN), width 512, 8 heads,
# FFN 2048, batch 16 x 256 tokens, mean-pooled linear head: 16 x 4 x (4*256*512^2*2 + 2*256^2*512*2
# + 2*256*512*2048*2) = ~112 GFLOP; eager ~2.5-3.5 ms. The encoder is traced into its layers and
# its attention written out as GEMMs and a row softmax (codegen/frontend/decompose.py).
import torch
import torch.nn as nn

batch_size = 16
seq_len = 256
dim = 512
heads = 8
ffn = 2048
depth = 4
num_classes = 100


class Model(nn.Module):
    """Post-norm transformer encoder over a token sequence, mean over tokens, linear head."""

    def __init__(self, dim: int, heads: int, ffn: int, depth: int, num_classes: int):
        super().__init__()
        layer = nn.TransformerEncoderLayer(dim, heads, ffn, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(dim=1))


def get_inputs():
    # U[-1, 1): with nn.Linear's init the attention logits spread by ~0.5-1 (neither uniform nor one-hot)
    return [torch.rand(batch_size, seq_len, dim) * 2 - 1]


def get_init_inputs():
    return [dim, heads, ffn, depth, num_classes]
