"""Honest: block-wide max, then block-wide sum of exponentials, then the normalised write."""
# harness-expect: problem=softmax static=clean strict=pass
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <math.h>
template <bool IsMax>
__device__ float block_reduce(float v, float* shared) {
  for (int off = 16; off > 0; off >>= 1) {
    float o = __shfl_xor_sync(0xffffffff, v, off);
    v = IsMax ? fmaxf(v, o) : v + o;
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float init = IsMax ? -INFINITY : 0.f;
  v = threadIdx.x < (blockDim.x >> 5) ? shared[threadIdx.x] : init;
  if (warp == 0) {
    for (int off = 16; off > 0; off >>= 1) {
      float o = __shfl_xor_sync(0xffffffff, v, off);
      v = IsMax ? fmaxf(v, o) : v + o;
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}
__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ float shared[32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = block_reduce<true>(m, shared);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
  s = block_reduce<false>(s, shared);
  const float inv = 1.f / s;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(row[c] - m) * inv;
}
extern "C" int two_pass_softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows == 0 || cols == 0) return 0;
  softmax_rows<<<(unsigned)rows, 1024, 0, s>>>(x, y, cols);
  return (int)cudaGetLastError();
}
'''

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
extern "C" int two_pass_softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t s);
static void check(int err, const char* what) {
  if (err != 0) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString((cudaError_t)err));
}
static void softmax(std::uintptr_t x, std::uintptr_t y, int64_t rows, int64_t cols, std::uintptr_t s) {
  check(two_pass_softmax(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), rows, cols, reinterpret_cast<cudaStream_t>(s)), "softmax");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("softmax", &softmax); }
'''

_ext = load_inline(name="harness_softmax_two_pass", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
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
