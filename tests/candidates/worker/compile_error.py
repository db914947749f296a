"""Candidate whose C++ does not compile: `yq` is undeclared on line 8 of CPP_SRC."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
static void affine(std::uintptr_t x, std::uintptr_t y, int64_t n, double scale, double bias) {
  const float* xp = reinterpret_cast<const float*>(x);
  float* yp = reinterpret_cast<float*>(y);
  for (int64_t i = 0; i < n; ++i)
    yq[i] = static_cast<float>(xp[i] * scale + bias);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("affine", &affine); }
'''

_ext = load_inline(name="stitch_affine_broken", cpp_sources=CPP_SRC, no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, scale: float, bias: float):
        super().__init__()
        self.scale = scale
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        _ext.affine(x.data_ptr(), y.data_ptr(), x.numel(), self.scale, self.bias)
        return y
