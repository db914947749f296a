"""On the GPU: a streaming elementwise kernel and a max pool in several launch shapes, against PyTorch.

Why: the evidence behind two template defaults (docs/benchmarks.md, "the fifth session"): a grid
capped at 8 or 16 blocks per SM against one block per 256 items, 64- against 32-bit index math in
the pool kernel. Standalone (load_inline), so it measures launch shapes, not our generated programs.

    python3 -m evals.device.stream_micro        (on the device machine, from the repository root)
"""

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>

static int sms() { int d; cudaGetDevice(&d); int n; cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, d); return n; }

__global__ void ew1(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = x[i]; v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f); y[i] = v;
  }
}
__global__ void ew1s(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = __ldcs(x + i); v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f); __stcs(y + i, v);
  }
}
template <int U>
__global__ void ewU(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  // U float4 per thread, a block covers blockDim*U consecutive float4 (coalesced per step)
  const int64_t base = (int64_t)blockIdx.x * blockDim.x * U + threadIdx.x;
  float4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) { int64_t i = base + (int64_t)u * blockDim.x; if (i < n4) v[u] = x[i]; }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    int64_t i = base + (int64_t)u * blockDim.x;
    if (i < n4) { float4 w = v[u]; w.x = fmaxf(w.x, 0.f); w.y = fmaxf(w.y, 0.f); w.z = fmaxf(w.z, 0.f); w.w = fmaxf(w.w, 0.f); y[i] = w; }
  }
}

void relu(torch::Tensor x, torch::Tensor y, int variant, int threads, int per_sm) {
  int64_t n4 = x.numel() / 4;
  auto s = at::cuda::getCurrentCUDAStream();
  const float4* a = (const float4*)x.data_ptr<float>(); float4* b = (float4*)y.data_ptr<float>();
  int64_t blocks = (n4 + threads - 1) / threads;
  if (per_sm > 0 && blocks > (int64_t)sms() * per_sm) blocks = (int64_t)sms() * per_sm;
  if (variant == 0) ew1<<<blocks, threads, 0, s>>>(a, b, n4);
  else if (variant == 1) ew1s<<<blocks, threads, 0, s>>>(a, b, n4);
  else if (variant == 2) ewU<2><<<(n4 + threads * 2 - 1) / (threads * 2), threads, 0, s>>>(a, b, n4);
  else if (variant == 4) ewU<4><<<(n4 + threads * 4 - 1) / (threads * 4), threads, 0, s>>>(a, b, n4);
  else if (variant == 8) ewU<8><<<(n4 + threads * 8 - 1) / (threads * 8), threads, 0, s>>>(a, b, n4);
}

// max pool 2d, k x k, stride, pad; int64 index math (today's) vs int32 index math
__global__ void pool64(const float* __restrict__ x, float* __restrict__ y, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow, int k, int st, int pd) {
  const int64_t total = planes * oh * ow;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t w_ = e % ow; int64_t t = e / ow; const int64_t h_ = t % oh; const int64_t p = t / oh;
    const int64_t xp = p * ih * iw; float acc = -INFINITY;
    for (int b = 0; b < k; ++b) { int64_t h = h_ * st - pd + b; if (h < 0 || h >= ih) continue;
      for (int c = 0; c < k; ++c) { int64_t w = w_ * st - pd + c; if (w < 0 || w >= iw) continue;
        float q = x[xp + h * iw + w]; if (q > acc || q != q) acc = q; } }
    y[e] = acc;
  }
}
__global__ void pool32(const float* __restrict__ x, float* __restrict__ y, int planes, int ih, int iw, int oh, int ow, int k, int st, int pd) {
  const int total = planes * oh * ow;
  const int step = gridDim.x * blockDim.x;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
    const int w_ = e % ow; int t = e / ow; const int h_ = t % oh; const int p = t / oh;
    const float* xp = x + (int64_t)p * ih * iw; float acc = -INFINITY;
    for (int b = 0; b < k; ++b) { int h = h_ * st - pd + b; if (h < 0 || h >= ih) continue;
      for (int c = 0; c < k; ++c) { int w = w_ * st - pd + c; if (w < 0 || w >= iw) continue;
        float q = __ldg(xp + h * iw + w); if (q > acc || q != q) acc = q; } }
    y[e] = acc;
  }
}
void pool(torch::Tensor x, torch::Tensor y, int variant, int k, int st, int pd, int threads, int per_sm) {
  auto s = at::cuda::getCurrentCUDAStream();
  int64_t planes = x.size(0) * x.size(1), ih = x.size(2), iw = x.size(3), oh = y.size(2), ow = y.size(3);
  int64_t total = planes * oh * ow;
  int64_t blocks = (total + threads - 1) / threads;
  if (per_sm > 0 && blocks > (int64_t)sms() * per_sm) blocks = (int64_t)sms() * per_sm;
  if (variant == 0) pool64<<<blocks, threads, 0, s>>>(x.data_ptr<float>(), y.data_ptr<float>(), planes, ih, iw, oh, ow, k, st, pd);
  else if (variant == 1) pool32<<<blocks, threads, 0, s>>>(x.data_ptr<float>(), y.data_ptr<float>(), planes, ih, iw, oh, ow, k, st, pd);
}
"""
CPP = "void relu(torch::Tensor x, torch::Tensor y, int variant, int threads, int per_sm);\nvoid pool(torch::Tensor x, torch::Tensor y, int variant, int k, int st, int pd, int threads, int per_sm);"


def extension() -> Any:
    """The kernels above, built with load_inline (a GPU machine; about a minute the first time)."""
    return load_inline(
        "stitch_micro", CPP, cuda_sources=CUDA, functions=["relu", "pool"], extra_cuda_cflags=["-O3"]
    )


def clock(fn: Callable[[], Any], runs: int = 50) -> float:
    for _ in range(5):
        fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = []
    for _ in range(3):
        torch.cuda.synchronize()
        s.record()
        for _ in range(runs):
            fn()
        e.record()
        torch.cuda.synchronize()
        best.append(s.elapsed_time(e) / runs)
    return sorted(best)[1]


def streaming(m: Any) -> None:
    """ReLU over 2 GiB: PyTorch, a copy (the ceiling) and our kernel in several launch shapes."""
    x = torch.rand(16384, 32768, device="cuda") - 0.5
    y = torch.empty_like(x)
    gb = 2 * x.numel() * 4 / 1e9
    rows = [("torch.relu", clock(lambda: torch.relu(x))), ("copy_ (ceiling)", clock(lambda: y.copy_(x)))]
    shapes = [("ew1 256 all", 0, 256, 0), ("ew1 512 all", 0, 512, 0), ("ew1 256 cap16", 0, 256, 16),
              ("ew1 256 cap8", 0, 256, 8), ("ew1s 256 all", 1, 256, 0), ("ewU2 256", 2, 256, 0),
              ("ewU4 256", 4, 256, 0), ("ewU4 128", 4, 128, 0), ("ewU8 128", 8, 128, 0)]  # fmt: skip
    for name, v, t, p in shapes:
        m.relu(x, y, v, t, p)
        assert torch.equal(y, torch.relu(x))
        rows.append((name, clock(functools.partial(m.relu, x, y, v, t, p))))
    for name, ms in rows:
        print(f"{name:20s} {ms:8.4f} ms  {gb / ms:6.2f} TB/s")


def pooling(m: Any) -> None:
    """3x3 stride-2 max pool of a 32x64x512x512 input: PyTorch and our kernel's index and grid choices."""
    xp = torch.rand(32, 64, 512, 512, device="cuda")
    ref = torch.nn.functional.max_pool2d(xp, 3, 2, 1)
    yp = torch.empty_like(ref)
    print(f"{'F.max_pool2d':20s} {clock(lambda: torch.nn.functional.max_pool2d(xp, 3, 2, 1), 20):8.4f} ms")
    for name, v, t, p in [
        ("pool64 256 cap8", 0, 256, 8),
        ("pool32 256 cap8", 1, 256, 8),
        ("pool32 256 all", 1, 256, 0),
    ]:
        m.pool(xp, yp, v, 3, 2, 1, t, p)
        assert torch.equal(yp, ref), name
        print(f"{name:20s} {clock(functools.partial(m.pool, xp, yp, v, 3, 2, 1, t, p), 20):8.4f} ms")


if __name__ == "__main__":
    built = extension()
    streaming(built)
    pooling(built)
