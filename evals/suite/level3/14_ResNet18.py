# Estimate (H200, fp32): ResNet-18 on 8x3x224x224: ~1.8 GFLOP per image x 8 = ~14.6 GFLOP; 11.7 M
# parameters; eager ~2-3 ms at this batch, launch-bound (about 70 kernels: 20 convs, 20 batch
# norms, ReLUs, residual adds, max-pool, adaptive pool, linear).
import torch
import torch.nn as nn

batch_size = 8
num_classes = 1000


class BasicBlock(nn.Module):
    def __init__(self, inp: int, out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.down = None
        if stride != 1 or inp != out:
            self.down = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        shortcut = x if self.down is None else self.down(x)
        return torch.relu(y + shortcut)


class Model(nn.Module):
    """ResNet-18: stem (7x7 conv, BN, ReLU, max-pool), four stages of two basic blocks, pool, linear."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        )
        blocks = []
        inp = 64
        for out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(inp, out, stride), BasicBlock(out, out, 1)]
            inp = out
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


def get_inputs():
    return [torch.rand(batch_size, 3, 224, 224)]


def get_init_inputs():
    return [num_classes]
