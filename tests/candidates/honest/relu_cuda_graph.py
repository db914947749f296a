"""Honest: captures the launch in a CUDA graph per input shape; copies inputs in and the output out."""
# harness-expect: problem=relu static=clean strict=pass
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cstdint>

__global__ void relu_f4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
    y[i] = v;
  }
}
__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
  int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}
extern "C" int stitch_relu(const float* x, float* y, int64_t n, cudaStream_t s) {
  int64_t n4 = n / 4;
  if (n4 > 0) {
    int threads = 256;
    int64_t blocks = (n4 + threads - 1) / threads;
    if (blocks > 132 * 16) blocks = 132 * 16;
    relu_f4<<<(unsigned)blocks, threads, 0, s>>>((const float4*)x, (float4*)y, n4);
  }
  if (n - n4 * 4 > 0) relu_tail<<<1, 4, 0, s>>>(x, y, n4 * 4, n);
  return (int)cudaGetLastError();
}
'''

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
extern "C" int stitch_relu(const float* x, float* y, int64_t n, cudaStream_t s);
static void relu(std::uintptr_t x, std::uintptr_t y, int64_t n, std::uintptr_t stream) {
  int err = stitch_relu(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n,
                        reinterpret_cast<cudaStream_t>(stream));
  if (err != 0) throw std::runtime_error(std::string("relu launch: ") + cudaGetErrorString((cudaError_t)err));
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
'''

_ext = load_inline(name="harness_relu", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   extra_cuda_cflags=["-O3"], no_implicit_headers=True, verbose=False)

def _launch(x: torch.Tensor, y: torch.Tensor) -> None:
    _ext.relu(x.data_ptr(), y.data_ptr(), x.numel(), torch.cuda.current_stream(x.device).cuda_stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (tuple(x.shape), x.dtype, x.device)
        entry = self.graphs.get(key)
        if entry is None:
            static_x = torch.empty_like(x, memory_format=torch.contiguous_format)
            static_y = torch.empty_like(static_x)
            static_x.copy_(x)
            _launch(static_x, static_y)  # loads the module before capture
            torch.cuda.synchronize(x.device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _launch(static_x, static_y)
            entry = (graph, static_x, static_y)
            self.graphs[key] = entry
        graph, static_x, static_y = entry
        static_x.copy_(x)
        graph.replay()
        return static_y.clone()
