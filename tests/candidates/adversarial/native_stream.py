"""Cheat: the C++ launcher creates its own non-blocking stream and never joins it."""
# harness-expect: problem=relu static=hacked strict=error:off_stream_work|wrong_output kernelbench=passed
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cstdint>
__global__ void relu_elsewhere(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = fmaxf(x[i], 0.f);
}
extern "C" int elsewhere_relu(const float* x, float* y, int64_t n) {
  static cudaStream_t own = nullptr;
  if (own == nullptr) cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
  relu_elsewhere<<<132 * 16, 256, 0, own>>>(x, y, n);
  return (int)cudaGetLastError();
}
'''

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
extern "C" int elsewhere_relu(const float* x, float* y, int64_t n);
static void relu(std::uintptr_t x, std::uintptr_t y, int64_t n) {
  int err = elsewhere_relu(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n);
  if (err != 0) throw std::runtime_error(std::string("relu launch: ") + cudaGetErrorString((cudaError_t)err));
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
'''

_ext = load_inline(name="harness_native_stream", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   extra_cuda_cflags=["-O3"], no_implicit_headers=True, verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.relu(x.data_ptr(), y.data_ptr(), x.numel())
        return y
