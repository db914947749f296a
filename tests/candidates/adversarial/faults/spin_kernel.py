"""Fault: a kernel that never finishes (the GPU spins until the worker is killed)."""
# harness-fault: status=timeout limit=60
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cstdint>
__global__ void spin_forever(float* y) {
  for (;;) { asm volatile("nanosleep.u32 1000;"); }
}
extern "C" int spin_launch(float* y, cudaStream_t s) {
  spin_forever<<<1, 32, 0, s>>>(y);
  return (int)cudaGetLastError();
}
'''

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <cuda_runtime.h>
extern "C" int spin_launch(float* y, cudaStream_t s);
static void spin(std::uintptr_t y, std::uintptr_t s) {
  if (spin_launch(reinterpret_cast<float*>(y), reinterpret_cast<cudaStream_t>(s)) != 0) throw std::runtime_error("launch");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("spin", &spin); }
'''

_ext = load_inline(name="harness_spin", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   extra_cuda_cflags=["-O3"], no_implicit_headers=True, verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        _ext.spin(y.data_ptr(), torch.cuda.current_stream(x.device).cuda_stream)
        return y
