# Estimate (H200, fp32): 69 GFLOP (32 steps x 2 * 128 * ((1024 + 2048) * 2048 + 2048 * 1024)); about
# 1.4 ms of fp32 GEMMs at 51 TFLOP/s, plus ~100 small kernels (cat, GEMMs, tanh) per forward.
# KernelBench's vanilla RNN style: the hidden state lives in a plain tensor attribute that forward
# overwrites (a state write the program must repeat); h0 resets it at each call, so two models called
# in lockstep agree.
import torch
import torch.nn as nn

seq_len = 32
batch_size = 128
input_size = 1024
hidden_size = 2048
output_size = 1024


class Model(nn.Module):
    """Elman RNN cell over a sequence, keeping its hidden state in self.hidden between steps."""

    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x: torch.Tensor, initial_hidden: torch.Tensor) -> torch.Tensor:
        # x: (seq_len, batch, input_size) -> (seq_len, batch, output_size)
        self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        outputs = []
        for t in range(x.size(0)):
            self.hidden = self.tanh(self.i2h(torch.cat((x[t], self.hidden), dim=1)))
            outputs.append(self.h2o(self.hidden))
        return torch.stack(outputs)


def get_inputs():
    return [torch.rand(seq_len, batch_size, input_size).sub_(0.5), torch.rand(batch_size, hidden_size).sub_(0.5)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
