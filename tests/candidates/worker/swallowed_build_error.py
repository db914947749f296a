"""Candidate that hides its failed build behind a PyTorch fallback (a known reward hack)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r'''
#include <pybind11/pybind11.h>
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}
'''

try:
    _ext = load_inline(name="stitch_swallow", cpp_sources=CPP_SRC, extra_cflags=["--no-such-flag"],
                       no_implicit_headers=True)
except Exception:
    _ext = None


class ModelNew(nn.Module):
    def __init__(self, scale: float, bias: float):
        super().__init__()
        self.scale = scale
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + self.bias
