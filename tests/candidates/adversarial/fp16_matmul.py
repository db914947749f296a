"""Cheat: rounds the fp32 operands to fp16 inside the kernel (a silent precision downgrade, as TF32 would be)."""
# harness-expect: problem=matmul static=suspicious strict=wrong_output kernelbench=passed
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdint>
#define TILE 32
__device__ __forceinline__ float load_elem(const float* p, int64_t r, int64_t c, int64_t rows, int64_t cols) {
  float v = (r < rows && c < cols) ? p[r * cols + c] : 0.f;
  return __half2float(__float2half(v));
}
// C[M,N] = A[M,K] @ B[K,N], fp32 accumulation, 32x32 shared-memory tiles.
__global__ void mm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                         int64_t M, int64_t N, int64_t K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  int64_t row = blockIdx.y * TILE + threadIdx.y;
  int64_t col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < K; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = load_elem(A, row, k0 + threadIdx.x, M, K);
    Bs[threadIdx.y][threadIdx.x] = load_elem(B, k0 + threadIdx.y, col, K, N);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
extern "C" int stitch_mm(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t s) {
  dim3 block(TILE, TILE);
  dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE));
  mm_tiled<<<grid, block, 0, s>>>(A, B, C, M, N, K);
  return (int)cudaGetLastError();
}
'''

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
extern "C" int stitch_mm(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t s);
static void mm(std::uintptr_t a, std::uintptr_t b, std::uintptr_t c, int64_t m, int64_t n, int64_t k, std::uintptr_t stream) {
  int err = stitch_mm(reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b), reinterpret_cast<float*>(c),
                      m, n, k, reinterpret_cast<cudaStream_t>(stream));
  if (err != 0) throw std::runtime_error(std::string("mm launch: ") + cudaGetErrorString((cudaError_t)err));
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("mm", &mm); }
'''

_ext = load_inline(name="harness_mm_fp16", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   extra_cuda_cflags=["-O3"], no_implicit_headers=True, verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        _ext.mm(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, torch.cuda.current_stream(a.device).cuda_stream)
        return c
