"""Honest: row chunks summed per block and combined with atomicAdd (the order varies between runs)."""
# harness-expect: problem=rowsum static=clean strict=pass
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cstdint>
__device__ float block_sum(float v) {
  __shared__ float shared[32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? shared[threadIdx.x] : 0.f;
  if (warp == 0)
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
  return v;  // valid in thread 0
}
#define CHUNK 2048
__global__ void rowsum_chunks(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  const float* row = x + blockIdx.y * cols;
  int64_t start = blockIdx.x * (int64_t)CHUNK;
  int64_t stop = start + CHUNK < cols ? start + CHUNK : cols;
  float v = 0.f;
  for (int64_t c = start + threadIdx.x; c < stop; c += blockDim.x) v += row[c];
  v = block_sum(v);
  if (threadIdx.x == 0) atomicAdd(y + blockIdx.y, v);
}
extern "C" int atomic_rowsum(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows == 0) return 0;
  cudaMemsetAsync(y, 0, rows * sizeof(float), s);
  if (cols == 0) return (int)cudaGetLastError();
  dim3 grid((unsigned)((cols + CHUNK - 1) / CHUNK), (unsigned)rows);
  rowsum_chunks<<<grid, 256, 0, s>>>(x, y, cols);
  return (int)cudaGetLastError();
}
'''

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
extern "C" int atomic_rowsum(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t s);
static void check(int err, const char* what) {
  if (err != 0) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString((cudaError_t)err));
}
static void rowsum(std::uintptr_t x, std::uintptr_t y, int64_t rows, int64_t cols, std::uintptr_t s) {
  check(atomic_rowsum(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), rows, cols, reinterpret_cast<cudaStream_t>(s)), "rowsum");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("rowsum", &rowsum); }
'''

_ext = load_inline(name="harness_rowsum_atomic", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   extra_cuda_cflags=["-O3"], no_implicit_headers=True, verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, 1, device=x.device, dtype=x.dtype)
        _ext.rowsum(x.data_ptr(), y.data_ptr(), rows, cols, torch.cuda.current_stream(x.device).cuda_stream)
        return y
