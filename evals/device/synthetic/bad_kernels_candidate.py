"""Synthetic candidate with planted kernel-level bottlenecks: profiling evidence, not a solution.

Each forward runs five kernels, compiled at import with NVRTC through CuPy and launched on the
caller's stream with raw pointers:
- transpose_naive (the output): reads rows, writes columns, so every store is uncoalesced;
- transpose_smem_conflicts: a 32x32 shared tile without padding, read by column: 32-way bank conflicts;
- divergent_scale: odd and even lanes run different 64-step loops: half of each warp idles;
- smem_hog: 200 KiB of dynamic shared memory per block: one block per SM, low theoretical occupancy;
- spill_scratch: a per-thread array indexed by data, so it lives in local memory.
"""

import cupy as cp
import numpy as np
import torch
import torch.nn as nn

SOURCE = r"""
extern "C" __global__ void transpose_naive(const float* __restrict__ x, float* __restrict__ y, int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (col < n) y[(long long)col * n + row] = 2.0f * x[(long long)row * n + col];
}

extern "C" __global__ void transpose_smem_conflicts(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[32][32];
    int bx = blockIdx.x * 32, by = blockIdx.y * 32;
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int j = ty; j < 32; j += 8) tile[j][tx] = x[(long long)(by + j) * n + bx + tx];
    __syncthreads();
    for (int j = ty; j < 32; j += 8) y[(long long)(bx + j) * n + by + tx] = 2.0f * tile[tx][j];
}

extern "C" __global__ void divergent_scale(const float* __restrict__ x, float* __restrict__ y, long long count) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    float v = x[i];
    if (threadIdx.x & 1) {
        for (int k = 0; k < 64; ++k) v = v * 0.999f + 0.001f;
    } else {
        for (int k = 0; k < 64; ++k) v = sinf(v) * 1.001f - 0.001f;
    }
    y[i] = v;
}

extern "C" __global__ void smem_hog(const float* __restrict__ x, float* __restrict__ y, long long count) {
    extern __shared__ float buffer[];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    buffer[threadIdx.x] = i < count ? x[i] : 0.0f;
    __syncthreads();
    if (i < count) y[i] = buffer[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void spill_scratch(const float* __restrict__ x, float* __restrict__ y, long long count) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    float scratch[64];
    for (int k = 0; k < 64; ++k) scratch[k] = x[i] * k;
    int j = ((int)(x[i] * 1000.0f)) & 63;
    y[i] = scratch[j] + scratch[63 - j];
}
"""

HOG_SHARED_BYTES = 200 * 1024
_MODULE = cp.RawModule(code=SOURCE, options=("-std=c++17",))
_KERNELS = {
    name: _MODULE.get_function(name)
    for name in (
        "transpose_naive",
        "transpose_smem_conflicts",
        "divergent_scale",
        "smem_hog",
        "spill_scratch",
    )
}
_KERNELS["smem_hog"].max_dynamic_shared_size_bytes = HOG_SHARED_BYTES


def _ptr(t: torch.Tensor) -> np.uint64:
    return np.uint64(t.data_ptr())


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.shape[0]
        count = np.int64(x.numel())
        y = torch.empty_like(x)
        scratch = torch.empty_like(x)
        flat_blocks = ((x.numel() + 255) // 256,)
        with cp.cuda.ExternalStream(torch.cuda.current_stream(x.device).cuda_stream):
            _KERNELS["transpose_smem_conflicts"](
                (n // 32, n // 32), (32, 8), (_ptr(x), _ptr(scratch), np.int32(n))
            )
            _KERNELS["divergent_scale"](flat_blocks, (256,), (_ptr(x), _ptr(scratch), count))
            _KERNELS["smem_hog"](
                flat_blocks, (256,), (_ptr(x), _ptr(scratch), count), shared_mem=HOG_SHARED_BYTES
            )
            _KERNELS["spill_scratch"](flat_blocks, (256,), (_ptr(x), _ptr(scratch), count))
            _KERNELS["transpose_naive"](((n + 255) // 256, n), (256,), (_ptr(x), _ptr(y), np.int32(n)))
        return y
