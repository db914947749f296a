// lib axis: arg-reductions, logsumexp and softmax along the middle axis of a [outer, R, inner] row-major view.
// OP 0 argmax, 1 argmin (state: the best value and its index; NaN beats every number and the first of
// equal values wins, as PyTorch), 2 logsumexp (state: running max and the sum of exp(x - max), one pass).
// Pro::load(e) / load4(e, v) read input element e (prologue fused); a non-null `saved` receives the loaded
// values; Epi::apply(v, o) finishes output value o. `y` gets values (null: not wanted), `idx` int64 indices.
//
// Kernels: inner == 1: one warp per row, or for long rows a block per row (split over several blocks
// with a stream-ordered workspace and a finishing pass when there are few rows); inner > 1: 32 adjacent
// columns per block (coalesced along inner), blockDim.y threads sharing each column's R elements, R split
// over gridDim.z when the columns alone cannot fill the GPU. Softmax over a non-last dim uses the column
// layout, online (max, sum) then one normalising pass, the column tile cached in shared memory when small.

#define STITCH_AXIS_EMPTY 9223372036854775807LL

struct StitchAxisState {
  float m;    // the best value (arg ops) or the running max (logsumexp)
  float s;    // sum of exp(x - m) (logsumexp)
  int64_t i;  // index along R of the best value (arg ops); STITCH_AXIS_EMPTY while nothing is seen
};

template <int OP>
__device__ __forceinline__ StitchAxisState stitch_axis_init() {
  StitchAxisState st;
  st.m = OP == 1 ? INFINITY : -INFINITY;
  st.s = 0.f;
  st.i = STITCH_AXIS_EMPTY;
  return st;
}

// Is (va, ia) a better extremum than (vb, ib)? Commutative in its tie-break, so any merge order gives
// PyTorch's answer: NaN first (the lowest-index NaN), then the larger (OP 0) or smaller (OP 1) value,
// then the lower index.
template <int OP>
__device__ __forceinline__ bool stitch_arg_better(float va, int64_t ia, float vb, int64_t ib) {
  const bool na = va != va;
  const bool nb = vb != vb;
  if (na || nb) return na && (!nb || ia < ib);
  if (va == vb) return ia < ib;
  return OP == 0 ? va > vb : va < vb;
}

// ---- lse step (compiles alone in the CPU emulation: tests/codegen/test_sweep.py)
// Online (max, sum of exp(x - max)) update with one element. -inf adds nothing; a NaN max sticks (every
// later comparison is false); a +inf max makes the sum NaN, as PyTorch's exp(inf - inf) does, so a
// softmax over it is NaN throughout (logsumexp ignores the sum then: stitch_lse_value).
__device__ __forceinline__ void stitch_lse_step(float& m, float& s, float v) {
  if (v > m) {
    s = v == INFINITY ? NAN : s * expf(m - v) + 1.f;
    m = v;
  } else if (v != v) {
    m = v;
  } else if (v != -INFINITY) {
    s += expf(v - m);
  }
}

struct StitchLseStep {  // stitch_lse_step as a value, for stitch_online_group's special cases
  __device__ __forceinline__ void operator()(float& m, float& s, float v) const { stitch_lse_step(m, s, v); }
};
// ---- end of lse step

__device__ __forceinline__ void stitch_lse_merge(float& m, float& s, float m2, float s2) {
  if (m != m) return;
  if (m2 != m2) {
    m = m2;
    return;
  }
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY || mn == INFINITY) {
    s = (m == mn ? s : 0.f) + (m2 == mn ? s2 : 0.f);
  } else {
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
  }
  m = mn;
}

// log(sum(exp(x))) from the state, PyTorch's special cases: NaN stays NaN, an infinite max is the answer.
__device__ __forceinline__ float stitch_lse_value(float m, float s) {
  if (m != m || m == INFINITY || m == -INFINITY) return m;
  return m + logf(s);
}

template <int OP>
__device__ __forceinline__ void stitch_axis_step(StitchAxisState& st, float v, int64_t r) {
  if (OP == 2) {
    stitch_lse_step(st.m, st.s, v);
  } else if (stitch_arg_better<OP>(v, r, st.m, st.i)) {
    st.m = v;
    st.i = r;
  }
}

// An arg op's step for a state fed its elements in increasing index order (the row kernels' float4
// lanes): an equal value never wins (the earlier index holds it, or nothing yet: an all-+inf argmin
// row stays empty and stores index 0, as PyTorch answers) and a NaN wins only over a number, so two
// comparisons replace stitch_arg_better's general tie-break (the merges keep that one). The column
// kernels keep the general step: with this one 46 (argmax over a middle dim) measured 0.714 -> 0.75 ms.
template <int OP>
__device__ __forceinline__ void stitch_axis_scan_step(StitchAxisState& st, float v, int64_t r) {
  const bool better = v != v ? st.m == st.m : (OP == 0 ? v > st.m : v < st.m);
  if (better) {
    st.m = v;
    st.i = r;
  }
}

template <int OP>
__device__ __forceinline__ void stitch_axis_merge(StitchAxisState& st, const StitchAxisState& o) {
  if (OP == 2) {
    stitch_lse_merge(st.m, st.s, o.m, o.s);
  } else if (stitch_arg_better<OP>(o.m, o.i, st.m, st.i)) {
    st = o;
  }
}

template <int OP>
__device__ __forceinline__ StitchAxisState stitch_axis_warp_merge(StitchAxisState st) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    StitchAxisState o;
    o.m = __shfl_xor_sync(STITCH_FULL_MASK, st.m, offset);
    o.s = __shfl_xor_sync(STITCH_FULL_MASK, st.s, offset);
    o.i = __shfl_xor_sync(STITCH_FULL_MASK, (long long)st.i, offset);
    stitch_axis_merge<OP>(st, o);
  }
  return st;
}

// Merge over the whole block (blockDim.x a multiple of 32); thread 0 gets the result.
template <int OP>
__device__ __forceinline__ StitchAxisState stitch_axis_block_merge(StitchAxisState st, StitchAxisState* part) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  st = stitch_axis_warp_merge<OP>(st);
  if (lane == 0) part[warp] = st;
  __syncthreads();
  if (warp == 0) {
    st = lane < warps ? part[lane] : stitch_axis_init<OP>();
    st = stitch_axis_warp_merge<OP>(st);
  }
  __syncthreads();  // `part` is reused by the next row
  return st;
}

template <int OP, class Epi>
__device__ __forceinline__ void stitch_axis_store(const Epi& epi, const StitchAxisState& st, float* y, int64_t* idx,
                                                  int64_t o) {
  if (OP == 2) {
    y[o] = epi.apply(stitch_lse_value(st.m, st.s), o);
  } else {
    if (idx != nullptr) idx[o] = st.i == STITCH_AXIS_EMPTY ? 0 : st.i;
    if (y != nullptr) y[o] = epi.apply(st.m, o);
  }
}

// Elements [lo, hi) of the row at `base`, strided over `nthreads` threads; indices r are row positions.
// `vec`: 16-byte loads (base, lo and hi multiples of 4, Pro::vec_ok()).
template <int OP, class Pro>
__device__ __forceinline__ void stitch_axis_row_part(const Pro& pro, float* saved, StitchAxisState& st, int64_t base,
                                                     int64_t lo, int64_t hi, int tid, int nthreads, bool vec) {
  if (vec && OP != 2) {  // arg ops: one state per float4 lane, four independent update chains merged
    // at the end (47's argmin, H100: 0.89 -> 0.73 ms); logsumexp keeps one state, since each lane merge
    // costs two expf (48: 1.00 -> 1.28 ms with lanes), and folds each batch of loads at once instead
    StitchAxisState lane[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) lane[k] = stitch_axis_init<OP>();
    stitch_sweep<4, 4>(pro, saved, base, lo + 4 * (int64_t)tid, hi, 4 * (int64_t)nthreads,
                       [&](const float* t, int64_t r) {
#pragma unroll
                         for (int k = 0; k < 4; ++k) stitch_axis_scan_step<OP>(lane[k], t[k], r + k);
                       });
#pragma unroll
    for (int k = 0; k < 4; ++k) stitch_axis_merge<OP>(st, lane[k]);
    return;
  }
  if (OP == 2) {
    stitch_by_width(vec, [&](auto width) {
      constexpr int W = decltype(width)::value;
      stitch_online_sweep<4, W>(pro, saved, base, lo + W * (int64_t)tid, hi, W * (int64_t)nthreads, st.m, st.s,
                                StitchLseStep(), StitchKeepNothing());
    });
    return;
  }
  stitch_sweep<4, 1>(pro, saved, base, lo + tid, hi, nthreads,
                     [&](const float* t, int64_t r) { stitch_axis_step<OP>(st, t[0], r); });
}

// inner == 1, rows up to a few thousand elements: one warp per row.
template <int OP, class Pro, class Epi>
__global__ void stitch_axis_warp_kernel(Pro pro, Epi epi, float* saved, float* y, int64_t* idx, int64_t rows, int64_t R,
                                        bool vec) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t stride = (int64_t)gridDim.x * warps;
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < rows; row += stride) {
    StitchAxisState st = stitch_axis_init<OP>();
    stitch_axis_row_part<OP>(pro, saved, st, row * R, 0, R, lane, 32, vec);
    st = stitch_axis_warp_merge<OP>(st);
    if (lane == 0) stitch_axis_store<OP>(epi, st, y, idx, row);
  }
}

// inner == 1, long rows: one block per (row, part) of `chunk` elements; with a workspace the part's state
// goes there (stitch_axis_finish_kernel merges the parts), otherwise straight to the output.
template <int OP, class Pro, class Epi>
__global__ void stitch_axis_block_kernel(Pro pro, Epi epi, float* saved, float* y, int64_t* idx,
                                         StitchAxisState* ws, int64_t rows, int64_t R, int64_t parts, int64_t chunk,
                                         bool vec) {
  __shared__ StitchAxisState part[32];
  for (int64_t w = blockIdx.x; w < rows * parts; w += gridDim.x) {
    const StitchRowPart rp = stitch_row_part(w, parts, chunk, R);
    const int64_t row = rp.row;
    StitchAxisState st = stitch_axis_init<OP>();
    stitch_axis_row_part<OP>(pro, saved, st, rp.base, rp.lo, rp.hi, threadIdx.x, blockDim.x, vec);
    st = stitch_axis_block_merge<OP>(st, part);
    if (threadIdx.x == 0) {
      if (ws != nullptr) {
        ws[w] = st;
      } else {
        stitch_axis_store<OP>(epi, st, y, idx, row);
      }
    }
  }
}

// inner > 1: threadIdx.x walks 32 adjacent columns, threadIdx.y splits R (rows r = lo + ty, lo + ty + Y, ...);
// gridDim.z splits R into parts of `chunk` (states to `ws[(o * inner + i) * parts + part]`).
template <int OP, class Pro, class Epi>
__global__ void stitch_axis_cols_kernel(Pro pro, Epi epi, float* saved, float* y, int64_t* idx, StitchAxisState* ws,
                                        int64_t outer, int64_t R, int64_t inner, int64_t parts, int64_t chunk) {
  __shared__ float pm[32][33];
  __shared__ float ps[32][33];
  __shared__ int64_t pi[32][33];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t i = (int64_t)blockIdx.x * 32 + tx;
  const int64_t lo = (int64_t)blockIdx.z * chunk;
  const int64_t hi = lo + chunk < R ? lo + chunk : R;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    StitchAxisState st = stitch_axis_init<OP>();
    if (i < inner) {  // rows r = lo + ty, lo + ty + Y, ... of column i, four loads in flight
      int64_t r = lo + ty;
      stitch_sweep<4, 1>(pro, saved, o * R * inner + i, r * inner, hi * inner, (int64_t)blockDim.y * inner,
                         [&](const float* t, int64_t) {
                           stitch_axis_step<OP>(st, t[0], r);
                           r += blockDim.y;
                         });
    }
    pm[ty][tx] = st.m;
    ps[ty][tx] = st.s;
    pi[ty][tx] = st.i;
    __syncthreads();
    if (ty == 0 && i < inner) {
      for (int k = 1; k < (int)blockDim.y; ++k) {
        StitchAxisState other;
        other.m = pm[k][tx];
        other.s = ps[k][tx];
        other.i = pi[k][tx];
        stitch_axis_merge<OP>(st, other);
      }
      if (ws != nullptr) {
        ws[(o * inner + i) * parts + blockIdx.z] = st;
      } else {
        stitch_axis_store<OP>(epi, st, y, idx, o * inner + i);
      }
    }
    __syncthreads();
  }
}

// inner > 1, inner a multiple of 4 and every operand 16-byte aligned: as the kernel above, but each
// thread owns 4 adjacent columns read as one float4 (128 columns per block, blockDim.y <= 8), so a warp
// moves 512 bytes per load instead of 128.
#define STITCH_AXIS_COLS4_Y 8
template <int OP, class Pro, class Epi>
__global__ void stitch_axis_cols4_kernel(Pro pro, Epi epi, float* saved, float* y, int64_t* idx, StitchAxisState* ws,
                                         int64_t outer, int64_t R, int64_t inner, int64_t parts, int64_t chunk) {
  __shared__ StitchAxisState part[STITCH_AXIS_COLS4_Y][128];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t i = ((int64_t)blockIdx.x * 32 + tx) * 4;
  const int64_t lo = (int64_t)blockIdx.z * chunk;
  const int64_t hi = lo + chunk < R ? lo + chunk : R;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    StitchAxisState st[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) st[k] = stitch_axis_init<OP>();
    if (i < inner) {  // rows r = lo + ty, lo + ty + Y, ... of columns i .. i + 3, four loads in flight
      int64_t r = lo + ty;
      stitch_sweep<4, 4>(pro, saved, o * R * inner + i, r * inner, hi * inner, (int64_t)blockDim.y * inner,
                         [&](const float* t, int64_t) {
#pragma unroll
                           for (int k = 0; k < 4; ++k) stitch_axis_step<OP>(st[k], t[k], r);
                           r += blockDim.y;
                         });
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) part[ty][4 * tx + k] = st[k];
    __syncthreads();
    if (ty == 0 && i < inner) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        for (int q = 1; q < (int)blockDim.y; ++q) stitch_axis_merge<OP>(st[k], part[q][4 * tx + k]);
        if (ws != nullptr) {
          ws[(o * inner + i + k) * parts + blockIdx.z] = st[k];
        } else {
          stitch_axis_store<OP>(epi, st[k], y, idx, o * inner + i + k);
        }
      }
    }
    __syncthreads();
  }
}

// Merges the `parts` states of each output (one warp per output) and stores it.
template <int OP, class Epi>
__global__ void stitch_axis_finish_kernel(Epi epi, const StitchAxisState* ws, float* y, int64_t* idx, int64_t outputs,
                                          int64_t parts) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t stride = (int64_t)gridDim.x * warps;
  for (int64_t o = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); o < outputs; o += stride) {
    StitchAxisState st = stitch_axis_init<OP>();
    for (int64_t p = lane; p < parts; p += 32) stitch_axis_merge<OP>(st, ws[o * parts + p]);
    st = stitch_axis_warp_merge<OP>(st);
    if (lane == 0) stitch_axis_store<OP>(epi, st, y, idx, o);
  }
}

static inline int64_t stitch_axis_div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <int OP, class Pro, class Epi>
static int stitch_axis_reduce_run(const Pro& pro, const Epi& epi, float* saved, float* y, int64_t* idx, int64_t outer,
                                  int64_t R, int64_t inner, cudaStream_t stream) {
  if (outer <= 0 || R <= 0 || inner <= 0) return (int)cudaGetLastError();
  const int64_t want = 2LL * stitch_sm_count();  // blocks that keep every SM busy
  const int64_t outputs = outer * inner;
  int64_t parts = 1;
  int64_t chunk = R;
  dim3 grid, block;
  const bool rows = inner == 1;
  const bool aligned = pro.vec_ok() && (saved == nullptr || stitch_aligned16(saved));
  const bool vec = rows && (R & 3) == 0 && aligned;
  const bool cols4 = !rows && (inner & 3) == 0 && aligned;
  if (rows) {
    if (R <= 4096) {
      stitch_axis_warp_kernel<OP, Pro, Epi><<<stitch_grid_all(outer, 8), 256, 0, stream>>>(pro, epi, saved, y, idx,
                                                                                          outer, R, vec);
      return (int)cudaGetLastError();
    }
    if (outer < want) {
      parts = stitch_axis_div_up(want, outer);
      const int64_t most = stitch_axis_div_up(R, 4096);  // at least 4096 elements a block
      if (parts > most) parts = most;
      chunk = (stitch_axis_div_up(R, parts) + 3) & ~3LL;
      parts = stitch_axis_div_up(R, chunk);
    }
    grid = dim3(stitch_grid_all(outer * parts, 1));
    block = dim3(R >= 32768 && parts == 1 ? 1024 : 256);
  } else {
    const int64_t tiles = stitch_axis_div_up(inner, cols4 ? 128 : 32);
    if (tiles > 2147483647LL) return (int)cudaErrorInvalidValue;
    int ythreads = R >= 64 ? 8 : (R >= 8 ? 4 : 1);
    const int64_t blocks = tiles * outer;
    if (blocks < want && R >= 256) {
      ythreads = cols4 ? STITCH_AXIS_COLS4_Y : 32;
      parts = stitch_axis_div_up(want, blocks);
      const int64_t most = stitch_axis_div_up(R, (int64_t)ythreads * 16);  // at least 16 elements a thread
      if (parts > most) parts = most;
      if (parts > 65535) parts = 65535;
      chunk = stitch_axis_div_up(R, parts);
      parts = stitch_axis_div_up(R, chunk);
    }
    grid = dim3((unsigned)tiles, (unsigned)(outer < 65535 ? outer : 65535), (unsigned)parts);
    block = dim3(32, ythreads);
  }
  // ws: each part's state, with a finishing pass, when the rows are cut into parts; none otherwise
  const auto run = [&](StitchAxisState* ws) {
    if (rows) {
      stitch_axis_block_kernel<OP, Pro, Epi><<<grid, block, 0, stream>>>(pro, epi, saved, y, idx, ws, outer, R, parts,
                                                                         chunk, vec);
    } else if (cols4) {
      stitch_axis_cols4_kernel<OP, Pro, Epi><<<grid, block, 0, stream>>>(pro, epi, saved, y, idx, ws, outer, R,
                                                                         inner, parts, chunk);
    } else {
      stitch_axis_cols_kernel<OP, Pro, Epi><<<grid, block, 0, stream>>>(pro, epi, saved, y, idx, ws, outer, R, inner,
                                                                        parts, chunk);
    }
    cudaError_t err = cudaGetLastError();
    if (ws != nullptr && err == cudaSuccess) {
      stitch_axis_finish_kernel<OP, Epi><<<stitch_grid_all(outputs, 8), 256, 0, stream>>>(epi, ws, y, idx, outputs,
                                                                                           parts);
      err = cudaGetLastError();
    }
    return (int)err;
  };
  return parts > 1 ? stitch_with_workspace<StitchAxisState>(outputs * parts, stream, run) : run(nullptr);
}

// Softmax / log-softmax along R of [outer, R, inner] (inner > 1): each column's (max, sum) online over its
// R elements (split over blockDim.y threads, merged in shared memory), then one normalising pass. CACHE keeps
// the block's [R][32] tile in dynamic shared memory so the input is read once.
template <bool LOG, bool CACHE, class Pro, class Epi>
__global__ void stitch_axis_softmax_kernel(Pro pro, Epi epi, float* saved, float* y, int64_t outer, int64_t R,
                                           int64_t inner) {
  extern __shared__ float stitch_axis_tile[];
  __shared__ float pm[32][33];
  __shared__ float ps[32][33];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t i = (int64_t)blockIdx.x * 32 + tx;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float m = -INFINITY;
    float s = 0.f;
    if (i < inner) {  // rows r = ty, ty + Y, ... of column i, four loads in flight
      int64_t r = ty;
      stitch_sweep<4, 1>(pro, saved, o * R * inner + i, r * inner, R * inner, (int64_t)blockDim.y * inner,
                         [&](const float* t, int64_t) {
                           if (CACHE) stitch_axis_tile[r * 32 + tx] = t[0];
                           stitch_lse_step(m, s, t[0]);
                           r += blockDim.y;
                         });
    }
    pm[ty][tx] = m;
    ps[ty][tx] = s;
    __syncthreads();
    if (ty == 0) {
      for (int k = 1; k < (int)blockDim.y; ++k) stitch_lse_merge(m, s, pm[k][tx], ps[k][tx]);
      pm[0][tx] = m;
      ps[0][tx] = s;
    }
    __syncthreads();
    m = pm[0][tx];
    s = ps[0][tx];
    const float log_s = logf(s);
    const float inv_s = 1.f / s;
    if (i < inner) {
      for (int64_t r = ty; r < R; r += blockDim.y) {
        const int64_t e = (o * R + r) * inner + i;
        const float t = CACHE ? stitch_axis_tile[r * 32 + tx] : pro.load(e);
        const float out = LOG ? (t - m) - log_s : expf(t - m) * inv_s;
        y[e] = epi.apply(out, e);
      }
    }
    __syncthreads();  // the next `o` reuses the tile and the slots
  }
}

#define STITCH_AXIS_CACHE_ROWS 256  // a cached tile of 256 x 32 floats is 32 KiB of dynamic shared memory

template <bool LOG, class Pro, class Epi>
static int stitch_axis_softmax_run(const Pro& pro, const Epi& epi, float* saved, float* y, int64_t outer, int64_t R,
                                   int64_t inner, cudaStream_t stream) {
  if (outer <= 0 || R <= 0 || inner <= 0) return (int)cudaGetLastError();
  const int64_t tiles = stitch_axis_div_up(inner, 32);
  if (tiles > 2147483647LL) return (int)cudaErrorInvalidValue;
  int ythreads = R >= 64 ? 8 : (R >= 8 ? 4 : 1);
  if (tiles * outer < 2LL * stitch_sm_count() && R >= 256) ythreads = 32;
  const dim3 grid((unsigned)tiles, (unsigned)(outer < 65535 ? outer : 65535));
  const dim3 block(32, ythreads);
  if (R <= STITCH_AXIS_CACHE_ROWS) {
    const size_t smem = (size_t)R * 32 * sizeof(float);
    stitch_axis_softmax_kernel<LOG, true, Pro, Epi><<<grid, block, smem, stream>>>(pro, epi, saved, y, outer, R, inner);
  } else {
    stitch_axis_softmax_kernel<LOG, false, Pro, Epi><<<grid, block, 0, stream>>>(pro, epi, saved, y, outer, R, inner);
  }
  return (int)cudaGetLastError();
}
