// lib softmax: softmax / log_softmax over the last dim of a [rows, cols] row-major view.
// Pro::load(e) gives the (prologue-transformed) input at flat index e; when `saved` is not null the
// loaded values are also written there (a fused prologue whose result is needed elsewhere).

// One warp per row, the row held in registers (cols <= 32 * VPT).
template <int VPT, bool LOG, class Pro, class Epi>
__global__ void stitch_softmax_warp_kernel(Pro pro, Epi epi, float* y, float* saved, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t stride = (int64_t)gridDim.x * warps;
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < rows; row += stride) {
    const int64_t base = row * cols;
    float v[VPT];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < cols) {
        const float t = pro.load(base + c);
        if (saved != nullptr) saved[base + c] = t;
        v[i] = t;
        m = stitch_max(m, t);
      } else {
        v[i] = -INFINITY;
      }
    }
    m = stitch_warp_reduce(m, StitchMaxOp());
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < cols) {
        const float ex = expf(v[i] - m);
        if (LOG) {
          v[i] = v[i] - m;
        } else {
          v[i] = ex;
        }
        s += ex;
      }
    }
    s = stitch_warp_reduce(s, StitchSumOp());
    const float log_s = LOG ? logf(s) : 0.f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < cols) {
        const float out = LOG ? v[i] - log_s : v[i] / s;
        y[base + c] = epi.apply(out, base + c);
      }
    }
  }
}

// One warp per row with 16-byte accesses: lane l holds float4 chunks l, l + 32, ... (cols % 4 == 0,
// cols <= 128 * V4, Pro::vec_ok() and y / saved 16-byte aligned).
template <int V4, bool LOG, class Pro, class Epi>
__global__ void stitch_softmax_warp4_kernel(Pro pro, Epi epi, float* y, float* saved, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t stride = (int64_t)gridDim.x * warps;
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < rows; row += stride) {
    const int64_t base = row * cols;
    float v[V4][4];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < V4; ++i) {
      const int64_t c = 4 * (lane + 32 * i);
      if (c < cols) {
        pro.load4(base + c, v[i]);
        if (saved != nullptr) stitch_st4(saved + base + c, v[i]);
#pragma unroll
        for (int k = 0; k < 4; ++k) m = stitch_max(m, v[i][k]);
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) v[i][k] = -INFINITY;
      }
    }
    m = stitch_warp_reduce(m, StitchMaxOp());
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < V4; ++i) {
      if (4 * (lane + 32 * i) < cols) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const float ex = expf(v[i][k] - m);
          v[i][k] = LOG ? v[i][k] - m : ex;
          s += ex;
        }
      }
    }
    s = stitch_warp_reduce(s, StitchSumOp());
    const float log_s = LOG ? logf(s) : 0.f;
    const float inv_s = 1.f / s;
#pragma unroll
    for (int i = 0; i < V4; ++i) {
      const int64_t c = 4 * (lane + 32 * i);
      if (c < cols) {
        float out[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) out[k] = epi.apply(LOG ? v[i][k] - log_s : v[i][k] * inv_s, base + c + k);
        stitch_st4(y + base + c, out);
      }
    }
  }
}

// Running (max, sum of exp) pair, merged so that -inf maxima never produce NaN.
__device__ __forceinline__ void stitch_ms_merge(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) {
    m = mn;
    s = 0.f;
    return;
  }
  s = s * expf(m - mn) + s2 * expf(m2 - mn);
  m = mn;
}

// Online (max, sum of exp) update by one value.
__device__ __forceinline__ void stitch_ms_add(float& m, float& s, float t) {
  if (t > m) {
    s = s * expf(m - t) + 1.f;
    m = t;
  } else if (t != -INFINITY) {
    s += expf(t - m);
  }
}

struct StitchMsAdd {  // stitch_ms_add as a value, for stitch_online_group's special cases
  __device__ __forceinline__ void operator()(float& m, float& s, float t) const { stitch_ms_add(m, s, t); }
};

// Every thread's (max, sum) merged over the block; every thread gets the result (red_m, red_s: 32 slots).
__device__ __forceinline__ void stitch_ms_block_merge(float& m, float& s, float* red_m, float* red_s) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(STITCH_FULL_MASK, m, offset);
    const float s2 = __shfl_xor_sync(STITCH_FULL_MASK, s, offset);
    stitch_ms_merge(m, s, m2, s2);
  }
  __syncthreads();
  if (lane == 0) {
    red_m[warp] = m;
    red_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < warps ? red_m[lane] : -INFINITY;
    s = lane < warps ? red_s[lane] : 0.f;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float m2 = __shfl_xor_sync(STITCH_FULL_MASK, m, offset);
      const float s2 = __shfl_xor_sync(STITCH_FULL_MASK, s, offset);
      stitch_ms_merge(m, s, m2, s2);
    }
    if (lane == 0) {
      red_m[0] = m;
      red_s[0] = s;
    }
  }
  __syncthreads();
  m = red_m[0];
  s = red_s[0];
  __syncthreads();  // the slots may be reused at once
}

// One block per row, the row kept in dynamic shared memory (cols floats): the input is read once.
template <bool LOG, class Pro, class Epi>
__global__ void stitch_softmax_block_kernel(Pro pro, Epi epi, float* y, float* saved, int64_t rows, int64_t cols) {
  extern __shared__ float stitch_row_cache[];
  __shared__ float red_m[32];
  __shared__ float red_s[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * cols;
    float m = -INFINITY;
    float s = 0.f;
    stitch_online_sweep<4, 1>(pro, saved, base, threadIdx.x, cols, blockDim.x, m, s, StitchMsAdd(),
                              [&](const float* t, int64_t c, int) { stitch_row_cache[c] = t[0]; });
    stitch_ms_block_merge(m, s, red_m, red_s);
    const float log_s = LOG ? logf(s) : 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float t = stitch_row_cache[c];
      const float out = LOG ? (t - m) - log_s : expf(t - m) / s;
      y[base + c] = epi.apply(out, base + c);
    }
    __syncthreads();  // the next row overwrites the cache and the reduction slots
  }
}

// Rows too long for shared memory, in parts (as lib layernorm): block (row, part) owns [lo, hi) of its
// row, 16-byte accesses when `vec`. Pass 1 writes each part's online (max, sum) to ws[2 * w]; pass 2
// merges its row's parts in order and writes its own part. parts = 1 is the plain two-read kernel.
// The two loops, shared with the fused kernel below:

// This thread's online (max, sum) over [lo, hi) of the row at `base` (saving the prologue's values).
template <class Pro>
__device__ __forceinline__ void stitch_softmax_part_stats(const Pro& pro, float* saved, int64_t base, int64_t lo,
                                                          int64_t hi, bool vec, float& m, float& s) {
  stitch_by_width(vec, [&](auto width) {
    constexpr int W = decltype(width)::value;
    stitch_online_sweep<2, W>(pro, saved, base, lo + W * (int64_t)threadIdx.x, hi, W * (int64_t)blockDim.x, m, s,
                              StitchMsAdd(), StitchKeepNothing());
  });
}

// This thread's outputs over [lo, hi) of the row at `base`, given the row's (max, sum).
template <bool LOG, class Pro, class Epi>
__device__ __forceinline__ void stitch_softmax_part_apply(const Pro& pro, const Epi& epi, float* y, int64_t base,
                                                          int64_t lo, int64_t hi, bool vec, float m, float s) {
  const float log_s = LOG ? logf(s) : 0.f;
  if (vec) {
#pragma unroll 4
    for (int64_t c = lo + 4 * (int64_t)threadIdx.x; c < hi; c += 4 * (int64_t)blockDim.x) {
      float t[4];
      pro.load4(base + c, t);
      float out[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) out[k] = epi.apply(LOG ? (t[k] - m) - log_s : expf(t[k] - m) / s, base + c + k);
      stitch_st4(y + base + c, out);
    }
  } else {
    for (int64_t c = lo + threadIdx.x; c < hi; c += blockDim.x) {
      const float t = pro.load(base + c);
      y[base + c] = epi.apply(LOG ? (t - m) - log_s : expf(t - m) / s, base + c);
    }
  }
}

template <class Pro>
__global__ void stitch_softmax_stats_kernel(Pro pro, float* saved, float* ws, int64_t rows, int64_t cols, int64_t parts,
                                            int64_t chunk, bool vec) {
  __shared__ float red_m[32];
  __shared__ float red_s[32];
  for (int64_t w = blockIdx.x; w < rows * parts; w += gridDim.x) {
    const StitchRowPart rp = stitch_row_part(w, parts, chunk, cols);
    float m = -INFINITY;
    float s = 0.f;
    stitch_softmax_part_stats(pro, saved, rp.base, rp.lo, rp.hi, vec, m, s);
    stitch_ms_block_merge(m, s, red_m, red_s);
    if (threadIdx.x == 0) {
      ws[2 * w] = m;
      ws[2 * w + 1] = s;
    }
  }
}

template <bool LOG, class Pro, class Epi>
__global__ void stitch_softmax_apply_kernel(Pro pro, Epi epi, float* y, const float* ws, int64_t rows, int64_t cols,
                                            int64_t parts, int64_t chunk, bool vec) {
  __shared__ float stats[2];
  for (int64_t item = blockIdx.x; item < rows * parts; item += gridDim.x) {
    const StitchRowPart rp = stitch_row_part(item, parts, chunk, cols);
    const int64_t row = rp.row;
    if (threadIdx.x == 0) {
      float m = -INFINITY;
      float s = 0.f;
      for (int64_t p = 0; p < parts; ++p) stitch_ms_merge(m, s, ws[2 * (row * parts + p)], ws[2 * (row * parts + p) + 1]);
      stats[0] = m;
      stats[1] = s;
    }
    __syncthreads();
    stitch_softmax_part_apply<LOG>(pro, epi, y, rp.base, rp.lo, rp.hi, vec, stats[0], stats[1]);
    __syncthreads();  // stats is rewritten for the next item
  }
}

// Rows longer than the static shared-memory cache, at least one per SM: one persistent block per SM and
// a row at a time. The row's head (`cached` floats, a multiple of 4) stays in opt-in shared memory and its
// tail is read again in the output pass, when it is still in L2 (the launcher checks that the tails of
// the rows in flight fit), so DRAM sees the input once where the stats + apply kernels read it twice.
template <bool LOG, class Pro, class Epi>
__global__ void __launch_bounds__(1024) stitch_softmax_long_kernel(Pro pro, Epi epi, float* y, float* saved,
                                                                   int64_t rows, int64_t cols, int64_t cached,
                                                                   bool vec) {
  extern __shared__ float stitch_row_head[];
  __shared__ float red_m[32];
  __shared__ float red_s[32];
  const int64_t step = (vec ? 4 : 1) * (int64_t)blockDim.x;
  const int64_t first = (vec ? 4 : 1) * (int64_t)threadIdx.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * cols;
    float m = -INFINITY;
    float s = 0.f;
    const auto keep = [&](const float* t, int64_t c, int n) { stitch_head_keep(stitch_row_head, c, cached, t, n); };
    stitch_by_width(vec, [&](auto width) {
      stitch_online_sweep<4, decltype(width)::value>(pro, saved, base, first, cols, step, m, s, StitchMsAdd(), keep);
    });
    stitch_ms_block_merge(m, s, red_m, red_s);  // ends with a barrier: the head is complete
    const float log_s = LOG ? logf(s) : 0.f;
    for (int64_t c = first; c < cols; c += step) {
      float t[4];
      const int n = stitch_head_or_tail(pro, stitch_row_head, base, c, cached, vec, t);
      float out[4];
      for (int k = 0; k < n; ++k) out[k] = epi.apply(LOG ? (t[k] - m) - log_s : expf(t[k] - m) / s, base + c + k);
      if (vec) {
        stitch_st4(y + base + c, out);
      } else {
        y[base + c] = out[0];
      }
    }
    __syncthreads();  // the next row overwrites the head
  }
}

// Launches the long-row kernel when the rows qualify; false (nothing launched) otherwise.
template <bool LOG, class Pro, class Epi>
static bool stitch_softmax_long_run(const Pro& pro, const Epi& epi, float* y, float* saved, int64_t rows, int64_t cols,
                                    bool vec, int knob_threads, cudaStream_t stream) {
  const int64_t cached = stitch_long_row_head(rows, cols, 1024);  // 1 KiB left for the static slots
  if (cached < 0) return false;
  const size_t smem = (size_t)cached * sizeof(float);
  static size_t granted[64] = {0};  // the opt-in, per device, once per instantiation
  if (!stitch_grant_smem(stitch_softmax_long_kernel<LOG, Pro, Epi>, smem, granted)) return false;
  const int threads = stitch_threads_or(knob_threads, 1024);
  stitch_softmax_long_kernel<LOG, Pro, Epi><<<(unsigned)stitch_sm_count(), threads, smem, stream>>>(
      pro, epi, y, saved, rows, cols, cached, vec);
  return true;
}

#define STITCH_SOFTMAX_CACHE_FLOATS 11776  // 46 KiB dynamic + the static slots stay under 48 KiB (no opt-in)

template <bool LOG, class Pro, class Epi>
// knob_threads: the block kernels' threads from the launch table (0: by the row length); the warp
// kernels of rows up to 1024 keep theirs.
static int stitch_softmax_run(const Pro& pro, const Epi& epi, float* y, float* saved, int64_t rows, int64_t cols,
                              int knob_threads, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return (int)cudaGetLastError();
  const bool vec = (cols & 3) == 0 && pro.vec_ok() && stitch_aligned16(y) && (saved == nullptr || stitch_aligned16(saved));
  if (cols <= 1024) {
    const int threads = 128;  // four rows per block, one block per four rows
    const unsigned grid = stitch_grid_all(rows, 4);
    if (vec && cols >= 128) {
      if (cols <= 256) {
        stitch_softmax_warp4_kernel<2, LOG, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, y, saved, rows, cols);
      } else if (cols <= 512) {
        stitch_softmax_warp4_kernel<4, LOG, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, y, saved, rows, cols);
      } else {
        stitch_softmax_warp4_kernel<8, LOG, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, y, saved, rows, cols);
      }
    } else if (cols <= 32) {
      stitch_softmax_warp_kernel<1, LOG, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, y, saved, rows, cols);
    } else if (cols <= 64) {
      stitch_softmax_warp_kernel<2, LOG, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, y, saved, rows, cols);
    } else if (cols <= 128) {
      stitch_softmax_warp_kernel<4, LOG, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, y, saved, rows, cols);
    } else if (cols <= 256) {
      stitch_softmax_warp_kernel<8, LOG, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, y, saved, rows, cols);
    } else if (cols <= 512) {
      stitch_softmax_warp_kernel<16, LOG, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, y, saved, rows, cols);
    } else {
      stitch_softmax_warp_kernel<32, LOG, Pro, Epi><<<grid, threads, 0, stream>>>(pro, epi, y, saved, rows, cols);
    }
    return (int)cudaGetLastError();
  }
  if (cols <= STITCH_SOFTMAX_CACHE_FLOATS) {
    const int threads = stitch_threads_or(knob_threads, cols >= 8192 ? 1024 : (cols >= 2048 ? 512 : 256));
    const size_t smem = (size_t)cols * sizeof(float);
    stitch_softmax_block_kernel<LOG, Pro, Epi><<<stitch_grid_all(rows, 1), threads, smem, stream>>>(pro, epi, y, saved,
                                                                                                   rows, cols);
    return (int)cudaGetLastError();
  }
  if (stitch_softmax_long_run<LOG>(pro, epi, y, saved, rows, cols, vec, knob_threads, stream)) {
    return (int)cudaGetLastError();
  }
  return stitch_two_pass_rows<float>(
      rows, cols, vec, 2,
      [&](unsigned grid, float* ws, int64_t parts, int64_t chunk) {
        stitch_softmax_stats_kernel<Pro><<<grid, stitch_threads_or(knob_threads, 512), 0, stream>>>(pro, saved, ws, rows,
                                                                                                 cols, parts, chunk, vec);
      },
      [&](unsigned grid, float* ws, int64_t parts, int64_t chunk) {
        stitch_softmax_apply_kernel<LOG, Pro, Epi><<<grid, stitch_threads_or(knob_threads, 512), 0, stream>>>(pro, epi, y, ws, rows, cols, parts, chunk,
                                                                             vec);
      },
      stream);
}
