# Estimate (H200, fp32): ~3.1 GFLOP per image x 10 = ~6 GFLOP (MobileNetV2 width 1.0 at 224x224);
# ~14 MB of weights; eager ~3-4 ms, launch- and memory-bound (about 150 kernels: 52 convs, 52
# batch norms, 35 ReLU6, 10 residual adds, pool, linear).
# Convolutions have no bias (each feeds a batch-statistics BatchNorm).
import torch
import torch.nn as nn

batch_size = 10
num_classes = 1000


def _conv_bn(inp: int, out: int, kernel: int, stride: int, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(inp, out, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out),
    ]
    if act:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """Expand (1x1) -> depthwise 3x3 -> project (1x1, linear); identity shortcut when shapes allow."""

    def __init__(self, inp: int, out: int, stride: int, expand: int):
        super().__init__()
        hidden = inp * expand
        self.use_shortcut = stride == 1 and inp == out
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_conv_bn(inp, hidden, 1, 1))
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden), _conv_bn(hidden, out, 1, 1, act=False)]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.use_shortcut else y


class Model(nn.Module):
    """MobileNetV2 (width 1.0): 17 inverted residual blocks, 1x1 head to 1280, pool, classifier."""

    def __init__(self, num_classes: int):
        super().__init__()
        # (expansion, channels, repeats, first stride)
        settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        layers: list[nn.Module] = [_conv_bn(3, 32, 3, 2)]
        inp = 32
        for expand, channels, repeats, stride in settings:
            for i in range(repeats):
                layers.append(InvertedResidual(inp, channels, stride if i == 0 else 1, expand))
                inp = channels
        layers.append(_conv_bn(inp, 1280, 1, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def get_inputs():
    return [torch.rand(batch_size, 3, 224, 224)]


def get_init_inputs():
    return [num_classes]
