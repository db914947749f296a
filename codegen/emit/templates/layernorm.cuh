// lib layernorm: y = (x - mean) / sqrt(var + eps) * w + b over the last `cols` elements of each row
// (biased variance, as nn.LayerNorm). w and b may be null. Pro / Epi / saved as in lib softmax.

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
      if (c < cols) {
        float wv[4] = {1.f, 1.f, 1.f, 1.f};
        float bv[4] = {0.f, 0.f, 0.f, 0.f};
        if (w != nullptr) stitch_ld4(w + c, wv);
        if (b != nullptr) stitch_ld4(b + c, bv);
        float out[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) out[k] = epi.apply((v[i][k] - mean) * rstd * wv[k] + bv[k], base + c + k);
        stitch_st4(y + base + c, out);
      }
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
    for (int64_t j = threadIdx.x; j < cols4; j += blockDim.x) {
      float t[4];
      pro.load4(base + 4 * j, t);
      if (saved != nullptr) stitch_st4(saved + base + 4 * j, t);
      stitch_row_cache4[j] = make_float4(t[0], t[1], t[2], t[3]);
      sum += (t[0] + t[1]) + (t[2] + t[3]);
    }
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
      float wv[4] = {1.f, 1.f, 1.f, 1.f};
      float bv[4] = {0.f, 0.f, 0.f, 0.f};
      if (w != nullptr) stitch_ld4(w + 4 * j, wv);
      if (b != nullptr) stitch_ld4(b + 4 * j, bv);
      float out[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) out[k] = epi.apply((t[k] - mean) * rstd * wv[k] + bv[k], base + 4 * j + k);
      stitch_st4(y + base + 4 * j, out);
    }
    __syncthreads();  // the next row overwrites the cache
  }
}

#define STITCH_LAYERNORM_CACHE_FLOATS 11776  // 46 KiB dynamic + static slots < 48 KiB

// One block per row. CACHE: the row lives in shared memory (two exact passes over it); otherwise
// sum and sum of squares are accumulated in double in one read, then a second read writes.
template <bool CACHE, class Pro, class Epi>
__global__ void stitch_layernorm_block_kernel(Pro pro, Epi epi, const float* w, const float* b, float* y, float* saved,
                                              int64_t rows, int64_t cols, float eps) {
  extern __shared__ float stitch_row_cache[];
  __shared__ float red_f[32];
  __shared__ double red_d[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * cols;
    float mean = 0.f;
    float rstd = 0.f;
    if (CACHE) {
      float sum = 0.f;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float t = pro.load(base + c);
        if (saved != nullptr) saved[base + c] = t;
        stitch_row_cache[c] = t;
        sum += t;
      }
      mean = stitch_block_reduce(sum, StitchSumOp(), 0.f, red_f) / (float)cols;
      float sq = 0.f;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = stitch_row_cache[c] - mean;
        sq += d * d;
      }
      const float var = stitch_block_reduce(sq, StitchSumOp(), 0.f, red_f) / (float)cols;
      rstd = 1.0f / sqrtf(var + eps);
    } else {
      double sum = 0.0;
      double sq = 0.0;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float t = pro.load(base + c);
        if (saved != nullptr) saved[base + c] = t;
        sum += (double)t;
        sq += (double)t * (double)t;
      }
      sum = stitch_block_reduce(sum, StitchSumOp(), 0.0, red_d);
      sq = stitch_block_reduce(sq, StitchSumOp(), 0.0, red_d);
      const double mean_d = sum / (double)cols;
      double var_d = sq / (double)cols - mean_d * mean_d;
      if (var_d < 0.0) var_d = 0.0;
      mean = (float)mean_d;
      rstd = (float)(1.0 / sqrt(var_d + (double)eps));
    }
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float t = CACHE ? stitch_row_cache[c] : pro.load(base + c);
      float out = (t - mean) * rstd;
      if (w != nullptr) out = out * w[c];
      if (b != nullptr) out = out + b[c];
      y[base + c] = epi.apply(out, base + c);
    }
    __syncthreads();  // the next row overwrites the cache
  }
}

template <class Pro, class Epi>
static int stitch_layernorm_run(const Pro& pro, const Epi& epi, const float* w, const float* b, float* y, float* saved,
                                int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
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
    const size_t smem = (size_t)cols * sizeof(float);
    stitch_layernorm_block4_kernel<Pro, Epi><<<grid, threads, smem, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
    return (int)cudaGetLastError();
  }
  const int threads = cols >= 8192 ? 1024 : (cols >= 2048 ? 512 : 256);
  if (cols <= STITCH_LAYERNORM_CACHE_FLOATS) {
    const size_t smem = (size_t)cols * sizeof(float);
    stitch_layernorm_block_kernel<true, Pro, Epi><<<grid, threads, smem, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
  } else {
    stitch_layernorm_block_kernel<false, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, w, b, y, saved, rows, cols, eps);
  }
  return (int)cudaGetLastError();
}
