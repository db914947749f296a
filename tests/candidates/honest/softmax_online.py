"""Honest: one block per row, online max/sum in one read, then a normalising pass."""
# harness-expect: problem=softmax static=clean strict=pass
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <math.h>
struct MS { float m; float s; };
__device__ __forceinline__ MS combine(MS a, MS b) {
  float m = fmaxf(a.m, b.m);
  float s = (a.m == -INFINITY ? 0.f : a.s * expf(a.m - m)) + (b.m == -INFINITY ? 0.f : b.s * expf(b.m - m));
  return {m, s};
}
__global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  MS acc = {-INFINITY, 0.f};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc = combine(acc, MS{row[c], 1.f});
  for (int off = 16; off > 0; off >>= 1) {
    MS other = {__shfl_xor_sync(0xffffffff, acc.m, off), __shfl_xor_sync(0xffffffff, acc.s, off)};
    acc = combine(acc, other);
  }
  __shared__ MS warps[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < (int)(blockDim.x >> 5) ? warps[lane] : MS{-INFINITY, 0.f};
    for (int off = 16; off > 0; off >>= 1) {
      MS other = {__shfl_xor_sync(0xffffffff, acc.m, off), __shfl_xor_sync(0xffffffff, acc.s, off)};
      acc = combine(acc, other);
    }
    if (lane == 0) warps[0] = acc;
  }
  __syncthreads();
  const float m = warps[0].m, inv = 1.f / warps[0].s;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(row[c] - m) * inv;
}
extern "C" int online_softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows == 0 || cols == 0) return 0;
  softmax_online<<<(unsigned)rows, 512, 0, s>>>(x, y, cols);
  return (int)cudaGetLastError();
}
'''

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
extern "C" int online_softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t s);
static void check(int err, const char* what) {
  if (err != 0) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString((cudaError_t)err));
}
static void softmax(std::uintptr_t x, std::uintptr_t y, int64_t rows, int64_t cols, std::uintptr_t s) {
  check(online_softmax(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), rows, cols, reinterpret_cast<cudaStream_t>(s)), "softmax");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("softmax", &softmax); }
'''

_ext = load_inline(name="harness_softmax_online", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   extra_cuda_cflags=["-O3"], no_implicit_headers=True, verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        _ext.softmax(x.data_ptr(), y.data_ptr(), rows, cols, torch.cuda.current_stream(x.device).cuda_stream)
        return y
