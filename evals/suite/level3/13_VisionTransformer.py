# Estimate (H200, fp32): ViT on 16x3x224x224, patch 16 (196 tokens + class token), width 384,
# 6 heads, MLP 1536, 6 layers (nn.TransformerEncoder, pre-norm, GELU), mean-free class-token head:
# ~16 x 6 x (4*197*384^2*2 + 2*197^2*384*2 + 2*197*384*1536*2) = ~53 GFLOP; eager ~3-4 ms.
import torch
import torch.nn as nn

batch_size = 16
image_size = 224
patch = 16
dim = 384
heads = 6
depth = 6
mlp_dim = 1536
num_classes = 1000


class Model(nn.Module):
    """Vision transformer: conv patch embedding, class token, positional embedding, encoder, head."""

    def __init__(self, image_size: int, patch: int, dim: int, heads: int, depth: int, mlp_dim: int, num_classes: int):
        super().__init__()
        tokens = (image_size // patch) ** 2
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(
            dim, heads, mlp_dim, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.encoder(x)
        return self.head(self.norm(x[:, 0]))


def get_inputs():
    return [torch.rand(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [image_size, patch, dim, heads, depth, mlp_dim, num_classes]
