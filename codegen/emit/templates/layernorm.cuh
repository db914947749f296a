// lib layernorm: y = (x - mean) / sqrt(var + eps) * w + b over the last `cols` elements of each row
// (biased variance, as nn.LayerNorm). w and b may be null. Pro / Epi / saved as in lib softmax.

// Four values t of columns c..c+3 normalised ((t - mean) * rstd), times w and plus b (either may be
// null), through the epilogue, stored as one float4 at y[base + c].
template <class Epi>
__device__ __forceinline__ void stitch_layernorm_store4(const Epi& epi, const float t[4], float mean, float rstd,
                                                        const float* w, const float* b, float* y, int64_t base,
                                                        int64_t c) {
  float wv[4] = {1.f, 1.f, 1.f, 1.f};
  float bv[4] = {0.f, 0.f, 0.f, 0.f};
  if (w != nullptr) stitch_ld4(w + c, wv);
  if (b != nullptr) stitch_ld4(b + c, bv);
  float out[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) out[k] = epi.apply((t[k] - mean) * rstd * wv[k] + bv[k], base + c + k);
  stitch_st4(y + base + c, out);
}

// One warp per row, the row held in registers (cols <= 32 * VPT); exact two-pass statistics.
template <int VPT, class Pro, class Epi>
__global__ void stitch_layernorm_warp_kernel(Pro pro, Epi epi, const float* w, const float* b, float* y, float* saved,
                                             int64_t rows, int64_t cols, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t stride = (int64_t)gridDim.x * warps;
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < rows; row += stride) {
    const int64_t base = row * cols;
    float v[VPT];
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t c = lane + 32 * i;
      v[i] = 0.f;
      if (c < cols) {
        v[i] = pro.load(base + c);
        if (saved != nullptr) saved[base + c] = v[i];
        sum += v[i];
      }
    }
    const float mean = stitch_warp_reduce(sum, StitchSumOp()) / (float)cols;
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < cols) {
        const float d = v[i] - mean;
        sq += d * d;
      }
    }
    const float var = stitch_warp_reduce(sq, StitchSumOp()) / (float)cols;
    const float rstd = 1.0f / sqrtf(var + eps);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < cols) {
        float out = (v[i] - mean) * rstd;
        if (w != nullptr) out = out * w[c];
        if (b != nullptr) out = out + b[c];
        y[base + c] = epi.apply(out, base + c);
      }
    }
  }
}

// One warp per row with 16-byte accesses (cols % 4 == 0, cols <= 128 * V4, every pointer aligned).
template <int V4, class Pro, class Epi>
__global__ void stitch_layernorm_warp4_kernel(Pro pro, Epi epi, const float* w, const float* b, float* y,
                                              float* saved, int64_t rows, int64_t cols, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t stride = (int64_t)gridDim.x * warps;
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < rows; row += stride) {
    const int64_t base = row * cols;
    float v[V4][4];
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < V4; ++i) {
      const int64_t c = 4 * (lane + 32 * i);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[i][k] = 0.f;
      if (c < cols) {
        pro.load4(base + c, v[i]);
        if (saved != nullptr) stitch_st4(saved + base + c, v[i]);
#pragma unroll
        for (int k = 0; k < 4; ++k) sum += v[i][k];
      }
    }
    const float mean = stitch_warp_reduce(sum, StitchSumOp()) / (float)cols;
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < V4; ++i) {
      if (4 * (lane + 32 * i) < cols) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const float d = v[i][k] - mean;
          sq += d * d;
        }
      }
    }
    const float var = stitch_warp_reduce(sq, StitchSumOp()) / (float)cols;
    const float rstd = 1.0f / sqrtf(var + eps);
#pragma unroll
    for (int i = 0; i < V4; ++i) {
      const int64_t c = 4 * (lane + 32 * i);
      if (c < cols) stitch_layernorm_store4(epi, v[i], mean, rstd, w, b, y, base, c);
    }
  }
}

// One block per row, the row cached in shared memory as float4 (cols % 4 == 0, every pointer aligned).
template <class Pro, class Epi>
__global__ void stitch_layernorm_block4_kernel(Pro pro, Epi epi, const float* w, const float* b, float* y,
                                               float* saved, int64_t rows, int64_t cols, float eps) {
  extern __shared__ float4 stitch_row_cache4[];
  __shared__ float red_f[32];
  const int64_t cols4 = cols / 4;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * cols;
    float sum = 0.f;
    stitch_sweep<4, 4>(pro, saved, base, 4 * (int64_t)threadIdx.x, cols, 4 * (int64_t)blockDim.x,
                       [&](const float* t, int64_t c) {
                         stitch_row_cache4[c / 4] = make_float4(t[0], t[1], t[2], t[3]);
                         sum += (t[0] + t[1]) + (t[2] + t[3]);
                       });
    const float mean = stitch_block_reduce(sum, StitchSumOp(), 0.f, red_f) / (float)cols;
    float sq = 0.f;
    for (int64_t j = threadIdx.x; j < cols4; j += blockDim.x) {
      const float4 t = stitch_row_cache4[j];
      const float d0 = t.x - mean, d1 = t.y - mean, d2 = t.z - mean, d3 = t.w - mean;
      sq += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
    }
    const float var = stitch_block_reduce(sq, StitchSumOp(), 0.f, red_f) / (float)cols;
    const float rstd = 1.0f / sqrtf(var + eps);
    for (int64_t j = threadIdx.x; j < cols4; j += blockDim.x) {
      const float4 q = stitch_row_cache4[j];
      const float t[4] = {q.x, q.y, q.z, q.w};
      stitch_layernorm_store4(epi, t, mean, rstd, w, b, y, base, 4 * j);
    }
    __syncthreads();  // the next row overwrites the cache
  }
}

#define STITCH_LAYERNORM_CACHE_FLOATS 11776  // 46 KiB dynamic + static slots < 48 KiB

// One block per row, the row cached in dynamic shared memory: two exact passes over it.
template <class Pro, class Epi>
__global__ void stitch_layernorm_block_kernel(Pro pro, Epi epi, const float* w, const float* b, float* y, float* saved,
                                              int64_t rows, int64_t cols, float eps) {
  extern __shared__ float stitch_row_cache[];
  __shared__ float red_f[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * cols;
    float sum = 0.f;
    stitch_sweep<4, 1>(pro, saved, base, threadIdx.x, cols, blockDim.x, [&](const float* t, int64_t c) {
      stitch_row_cache[c] = t[0];
      sum += t[0];
    });
    const float mean = stitch_block_reduce(sum, StitchSumOp(), 0.f, red_f) / (float)cols;
    float sq = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = stitch_row_cache[c] - mean;
      sq += d * d;
    }
    const float var = stitch_block_reduce(sq, StitchSumOp(), 0.f, red_f) / (float)cols;
    const float rstd = 1.0f / sqrtf(var + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float out = (stitch_row_cache[c] - mean) * rstd;
      if (w != nullptr) out = out * w[c];
      if (b != nullptr) out = out + b[c];
      y[base + c] = epi.apply(out, base + c);
    }
    __syncthreads();  // the next row overwrites the cache
  }
}

// Rows too long for shared memory, in parts: block (row, part) owns elements [lo, hi) of its row, a
// multiple of 4 wide when `vec`. Pass 1 writes each part's sum and sum of squares (double) to ws[2 * w];
// pass 2 folds its row's parts in order (deterministic), then normalises its own part. With parts = 1
// this is the plain two-read row kernel; with more, few long rows still fill the GPU.
template <class Pro>
__global__ void stitch_layernorm_stats_kernel(Pro pro, float* saved, double* ws, int64_t rows, int64_t cols,
                                              int64_t parts, int64_t chunk, bool vec) {
  __shared__ double red_d[32];
  for (int64_t w = blockIdx.x; w < rows * parts; w += gridDim.x) {
    const StitchRowPart rp = stitch_row_part(w, parts, chunk, cols);
    const int64_t base = rp.base, lo = rp.lo, hi = rp.hi;
    double sum = 0.0;
    double sq = 0.0;
    stitch_row_part_sweep<4>(
        pro, saved, base, lo, hi, vec,
        [&](const float* t) {
          sum += (double)((t[0] + t[1]) + (t[2] + t[3]));
          sq += (double)((t[0] * t[0] + t[1] * t[1]) + (t[2] * t[2] + t[3] * t[3]));
        },
        [&](float t) {
          sum += (double)t;
          sq += (double)t * (double)t;
        });
    sum = stitch_block_reduce(sum, StitchSumOp(), 0.0, red_d);
    sq = stitch_block_reduce(sq, StitchSumOp(), 0.0, red_d);
    if (threadIdx.x == 0) {
      ws[2 * w] = sum;
      ws[2 * w + 1] = sq;
    }
  }
}

template <class Pro, class Epi>
__global__ void stitch_layernorm_apply_kernel(Pro pro, Epi epi, const float* w, const float* b, float* y,
                                              const double* ws, int64_t rows, int64_t cols, int64_t parts,
                                              int64_t chunk, float eps, bool vec) {
  __shared__ float stats[2];
  for (int64_t item = blockIdx.x; item < rows * parts; item += gridDim.x) {
    const StitchRowPart rp = stitch_row_part(item, parts, chunk, cols);
    const int64_t row = rp.row, base = rp.base, lo = rp.lo, hi = rp.hi;
    if (threadIdx.x == 0) {
      double sum = 0.0;
      double sq = 0.0;
      for (int64_t p = 0; p < parts; ++p) {
        sum += ws[2 * (row * parts + p)];
        sq += ws[2 * (row * parts + p) + 1];
      }
      const double mean = sum / (double)cols;
      double var = sq / (double)cols - mean * mean;
      if (var < 0.0) var = 0.0;
      stats[0] = (float)mean;
      stats[1] = (float)(1.0 / sqrt(var + (double)eps));
    }
    __syncthreads();
    const float mean = stats[0];
    const float rstd = stats[1];
    if (vec) {
#pragma unroll 4
      for (int64_t c = lo + 4 * (int64_t)threadIdx.x; c < hi; c += 4 * (int64_t)blockDim.x) {
        float t[4];
        pro.load4(base + c, t);
        stitch_layernorm_store4(epi, t, mean, rstd, w, b, y, base, c);
      }
    } else {
      for (int64_t c = lo + threadIdx.x; c < hi; c += blockDim.x) {
        float out = (pro.load(base + c) - mean) * rstd;
        if (w != nullptr) out = out * w[c];
        if (b != nullptr) out = out + b[c];
        y[base + c] = epi.apply(out, base + c);
      }
    }
    __syncthreads();  // stats is rewritten for the next item
  }
}

template <class Pro, class Epi>
static int stitch_layernorm_parts(const Pro& pro, const Epi& epi, const float* w, const float* b, float* y, float* saved,
                                  int64_t rows, int64_t cols, float eps, bool vec, int threads, cudaStream_t stream) {
  return stitch_two_pass_rows<double>(
      rows, cols, vec, 2,
      [&](unsigned grid, double* ws, int64_t parts, int64_t chunk) {
        stitch_layernorm_stats_kernel<Pro><<<grid, threads, 0, stream>>>(pro, saved, ws, rows, cols, parts, chunk, vec);
      },
      [&](unsigned grid, double* ws, int64_t parts, int64_t chunk) {
        stitch_layernorm_apply_kernel<Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, ws, rows, cols, parts,
                                                                              chunk, eps, vec);
      },
      stream);
}

template <class Pro, class Epi>
// knob_threads: the block kernels' threads from the launch table (0: by the row length); the warp
// kernels of rows up to 1024 keep theirs.
static int stitch_layernorm_run(const Pro& pro, const Epi& epi, const float* w, const float* b, float* y, float* saved,
                                int64_t rows, int64_t cols, float eps, int knob_threads, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return (int)cudaGetLastError();
  const bool vec = (cols & 3) == 0 && pro.vec_ok() && stitch_aligned16(y) &&
                   (saved == nullptr || stitch_aligned16(saved)) && (w == nullptr || stitch_aligned16(w)) &&
                   (b == nullptr || stitch_aligned16(b));
  if (cols <= 1024) {
    const int threads = 128;
    const unsigned grid = stitch_grid_all(rows, 4);
    if (vec && cols >= 128) {
      if (cols <= 256) {
        stitch_layernorm_warp4_kernel<2, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
      } else if (cols <= 512) {
        stitch_layernorm_warp4_kernel<4, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
      } else {
        stitch_layernorm_warp4_kernel<8, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
      }
    } else if (cols <= 32) {
      stitch_layernorm_warp_kernel<1, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
    } else if (cols <= 64) {
      stitch_layernorm_warp_kernel<2, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
    } else if (cols <= 128) {
      stitch_layernorm_warp_kernel<4, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
    } else if (cols <= 256) {
      stitch_layernorm_warp_kernel<8, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
    } else if (cols <= 512) {
      stitch_layernorm_warp_kernel<16, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
    } else {
      stitch_layernorm_warp_kernel<32, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
    }
    return (int)cudaGetLastError();
  }
  const unsigned grid = stitch_grid_all(rows, 1);
  if (vec && cols <= STITCH_LAYERNORM_CACHE_FLOATS) {
    // About eight float4 per thread: few threads per row, many rows resident per SM.
    int threads = 128;
    while (threads < 1024 && (int64_t)threads * 32 < cols) threads *= 2;
    threads = stitch_threads_or(knob_threads, threads);
    const size_t smem = (size_t)cols * sizeof(float);
    stitch_layernorm_block4_kernel<Pro, Epi><<<grid, threads, smem, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
    return (int)cudaGetLastError();
  }
  if (cols <= STITCH_LAYERNORM_CACHE_FLOATS) {
    const int threads = stitch_threads_or(knob_threads, cols >= 8192 ? 1024 : (cols >= 2048 ? 512 : 256));
    const size_t smem = (size_t)cols * sizeof(float);
    stitch_layernorm_block_kernel<Pro, Epi><<<grid, threads, smem, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
    return (int)cudaGetLastError();
  }
  return stitch_layernorm_parts<Pro, Epi>(pro, epi, w, b, y, saved, rows, cols, eps, vec,
                                          stitch_threads_or(knob_threads, 512), stream);
}
