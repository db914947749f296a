"""Linear then ReLU: parameters come from nn.Linear, so weights match only under KernelBench's seeding."""
import torch
import torch.nn as nn

batch_size = 512
in_features = 1024
out_features = 1024


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
