# Estimate (H200, fp32): a 3-level U-Net on 8x3x128x128 (channels 32/64/128, bottleneck 256):
# double 3x3 conv-BN-ReLU per level, max-pool down, transposed-conv up, skip concatenations,
# 1x1 head and a softmax over the class channels: ~30 GFLOP; eager ~2-3 ms.
import torch
import torch.nn as nn

batch_size = 8
in_channels = 3
classes = 8
size = 128


def double_conv(inp: int, out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(inp, out, 3, padding=1, bias=False),
        nn.BatchNorm2d(out),
        nn.ReLU(inplace=True),
        nn.Conv2d(out, out, 3, padding=1, bias=False),
        nn.BatchNorm2d(out),
        nn.ReLU(inplace=True),
    )


class Model(nn.Module):
    """Encoder/decoder with skip connections; per-pixel softmax over classes."""

    def __init__(self, in_channels: int, classes: int):
        super().__init__()
        widths = [32, 64, 128]
        self.down = nn.ModuleList()
        prev = in_channels
        for w in widths:
            self.down.append(double_conv(prev, w))
            prev = w
        self.pool = nn.MaxPool2d(2)
        self.bottom = double_conv(widths[-1], widths[-1] * 2)
        self.up = nn.ModuleList(nn.ConvTranspose2d(w * 2, w, 2, stride=2) for w in reversed(widths))
        self.dec = nn.ModuleList(double_conv(w * 2, w) for w in reversed(widths))
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], dim=1))
        return torch.softmax(self.head(x), dim=1)


def get_inputs():
    return [torch.rand(batch_size, in_channels, size, size)]


def get_init_inputs():
    return [in_channels, classes]
