"""Honest: one element per thread."""
# harness-expect: problem=relu static=clean strict=pass
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cstdint>

__global__ void relu_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
extern "C" int scalar_relu(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return 0;
  relu_scalar<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, y, n);
  return (int)cudaGetLastError();
}
'''

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
extern "C" int scalar_relu(const float* x, float* y, int64_t n, cudaStream_t s);
static void check(int err, const char* what) {
  if (err != 0) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString((cudaError_t)err));
}
static void relu(std::uintptr_t x, std::uintptr_t y, int64_t n, std::uintptr_t s) {
  check(scalar_relu(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n, reinterpret_cast<cudaStream_t>(s)), "relu");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
'''

_ext = load_inline(name="harness_relu_scalar", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   extra_cuda_cflags=["-O3"], no_implicit_headers=True, verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.relu(x.data_ptr(), y.data_ptr(), x.numel(), torch.cuda.current_stream(x.device).cuda_stream)
        return y
