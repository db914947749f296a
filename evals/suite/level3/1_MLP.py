# Estimate (H200, fp32, no TF32): 55.8 GFLOP (2 * 512 * 54.5 M weights); ~0.25 GB moved (218 MB
# of weights, 8 MB activations per layer); ~1.1 ms at 51 TFLOP/s, ~1.3 ms eager (batch 512 GEMMs
# run below the large-GEMM rate). Seven kernels (four addmm, three ReLU).
import torch
import torch.nn as nn

batch_size = 512
input_size = 4096
layer_sizes = [4096, 4096, 4096]
output_size = 1024


class Model(nn.Module):
    """Multi-layer perceptron: Linear + ReLU for each hidden layer, then an output Linear."""

    def __init__(self, input_size: int, layer_sizes: list[int], output_size: int):
        super().__init__()
        layers: list[nn.Module] = []
        width = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(width, size))
            layers.append(nn.ReLU())
            width = size
        layers.append(nn.Linear(width, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def get_inputs():
    x = torch.rand(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
