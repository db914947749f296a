"""Fault: a constexpr loop of 4e9 steps with the compiler's limits lifted: g++ never finishes."""
# harness-fault: status=timeout limit=45
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r'''
#include <pybind11/pybind11.h>
constexpr unsigned long long spin() {
  unsigned long long s = 0;
  for (unsigned long long i = 0; i < 4000000000ULL; ++i) s += i ^ (s >> 3);
  return s;
}
static_assert(spin() != 1, "evaluated at compile time");
static int answer() { return 42; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("answer", &answer); }
'''

_ext = load_inline(name="harness_compiler_hang", cpp_sources=CPP_SRC, no_implicit_headers=True, verbose=False,
                   extra_cflags=["-fconstexpr-loop-limit=2147483647", "-fconstexpr-ops-limit=4611686018427387904"])


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return inputs[0] * _ext.answer()
