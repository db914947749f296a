"""Cheat: the C++ binding calls at::matmul; a CUDA kernel is compiled for show and never launched."""
# harness-expect: problem=matmul static=suspicious strict=error:own_kernels_not_run kernelbench=passed
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cstdint>
__global__ void mm_for_show(const float* a, const float* b, float* c, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] * b[i];
}
'''

CPP_SRC = r'''
#include <torch/extension.h>
torch::Tensor mm(torch::Tensor a, torch::Tensor b) { return at::matmul(a, b); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("mm", &mm); }
'''

_ext = load_inline(name="harness_torch_binding", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   extra_cuda_cflags=["-O3"], no_implicit_headers=True, verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.mm(a, b)
