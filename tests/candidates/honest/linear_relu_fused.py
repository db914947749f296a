"""Honest: x @ W^T + b and ReLU in one tiled fp32 kernel; nn.Linear keeps the reference's parameters."""
# harness-expect: problem=linear_relu static=clean strict=pass
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <cuda_runtime.h>
#include <cstdint>
#define TILE 32
// Y[M,N] = relu(X[M,K] @ W[N,K]^T + b[N])
__global__ void linear_relu(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ b,
                            float* __restrict__ Y, int64_t M, int64_t N, int64_t K) {
  __shared__ float Xs[TILE][TILE + 1];
  __shared__ float Ws[TILE][TILE + 1];
  int64_t row = blockIdx.y * TILE + threadIdx.y;
  int64_t col = blockIdx.x * TILE + threadIdx.x;
  int64_t wrow = blockIdx.x * TILE + threadIdx.y;  // the W row this thread loads
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < K; k0 += TILE) {
    int64_t k = k0 + threadIdx.x;
    Xs[threadIdx.y][threadIdx.x] = (row < M && k < K) ? X[row * K + k] : 0.f;
    Ws[threadIdx.x][threadIdx.y] = (wrow < N && k < K) ? W[wrow * K + k] : 0.f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TILE; ++kk) acc = fmaf(Xs[threadIdx.y][kk], Ws[kk][threadIdx.x], acc);
    __syncthreads();
  }
  if (row < M && col < N) Y[row * N + col] = fmaxf(acc + b[col], 0.f);
}
extern "C" int fused_linear_relu(const float* X, const float* W, const float* b, float* Y,
                                 int64_t M, int64_t N, int64_t K, cudaStream_t s) {
  dim3 block(TILE, TILE);
  dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE));
  linear_relu<<<grid, block, 0, s>>>(X, W, b, Y, M, N, K);
  return (int)cudaGetLastError();
}
'''

CPP_SRC = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
extern "C" int fused_linear_relu(const float* X, const float* W, const float* b, float* Y, int64_t M, int64_t N, int64_t K, cudaStream_t s);
static void check(int err, const char* what) {
  if (err != 0) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString((cudaError_t)err));
}
static void linear_relu(std::uintptr_t x, std::uintptr_t w, std::uintptr_t b, std::uintptr_t y,
                        int64_t m, int64_t n, int64_t k, std::uintptr_t s) {
  check(fused_linear_relu(reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(w), reinterpret_cast<const float*>(b),
                          reinterpret_cast<float*>(y), m, n, k, reinterpret_cast<cudaStream_t>(s)), "linear_relu");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("linear_relu", &linear_relu); }
'''

_ext = load_inline(name="harness_linear_relu", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   extra_cuda_cflags=["-O3"], no_implicit_headers=True, verbose=False)

class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        b = self.linear.bias.contiguous()
        m, k = x.shape
        n = w.shape[0]
        y = torch.empty(m, n, device=x.device, dtype=x.dtype)
        _ext.linear_relu(x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr(), m, n, k,
                         torch.cuda.current_stream(x.device).cuda_stream)
        return y
