// lib scan: inclusive cumsum / cumprod of a [outer, n, inner] row-major view along n.
// OP 0 sum, 1 product. REVERSE scans each row from its end (flip(cumsum(flip(x)))). Pro::load(e) /
// load4(e, v) read the (prologue-transformed) input; a non-null `mask` multiplies each loaded element by
// (float)mask[e] (x * bool_mask); a non-null `saved` receives the prologue result; Epi::apply(v, e)
// finishes output element e. Indices e are physical (row-major) positions, so epilogue operands line up.
//
// Kernels: inner == 1 and short rows: one warp per row, carry across 128-element chunks;
// inner == 1 and long rows: 4096-element tiles, one block each, decoupled look-back for the tile's prefix
// (one pass: the input is read once and the output written once); inner > 1: one thread per column.

#define STITCH_SCAN_THREADS 256
#define STITCH_SCAN_ITERS 4  // 128-element chunks per warp in a tile
#define STITCH_SCAN_WARP_ROW_MAX 1024
static const int64_t STITCH_SCAN_TILE = (STITCH_SCAN_THREADS / 32) * 128 * STITCH_SCAN_ITERS;

template <int OP>
__device__ __forceinline__ float stitch_scan_identity() {
  return OP == 0 ? 0.f : 1.f;
}

template <int OP>
__device__ __forceinline__ float stitch_scan_op(float a, float b) {
  return OP == 0 ? a + b : a * b;
}

// Inclusive scan across the warp: lane i gets op(v_0, ..., v_i).
template <int OP>
__device__ __forceinline__ float stitch_warp_scan(float v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const float t = __shfl_up_sync(STITCH_FULL_MASK, v, offset);
    if (lane >= offset) v = stitch_scan_op<OP>(t, v);
  }
  return v;
}

template <class Pro>
__device__ __forceinline__ float stitch_scan_read(const Pro& pro, const bool* mask, float* saved, int64_t e) {
  const float x = pro.load(e);
  if (saved != nullptr) saved[e] = x;
  return mask != nullptr ? x * (float)mask[e] : x;
}

// Logical elements j..j+3 of the row at `base` (logical j is physical j, or n-1-j when REVERSE); past
// the row's end the identity. `vec` (n % 4 == 0, aligned operands) allows one 16-byte load.
template <int OP, bool REVERSE, class Pro>
__device__ __forceinline__ void stitch_scan_load4(const Pro& pro, const bool* mask, float* saved, int64_t base,
                                                  int64_t n, int64_t j, bool vec, float v[4]) {
  if (vec && j < n) {
    const int64_t p = REVERSE ? n - 4 - j : j;
    float t[4];
    pro.load4(base + p, t);
    if (saved != nullptr) stitch_st4(saved + base + p, t);
    if (mask != nullptr) {  // the four mask bytes in one 4-byte load (the launcher checks the alignment)
      const uchar4 m = *reinterpret_cast<const uchar4*>(mask + base + p);
      t[0] *= (float)(m.x != 0);
      t[1] *= (float)(m.y != 0);
      t[2] *= (float)(m.z != 0);
      t[3] *= (float)(m.w != 0);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = t[REVERSE ? 3 - k : k];
    return;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t jj = j + k;
    v[k] = jj < n ? stitch_scan_read(pro, mask, saved, base + (REVERSE ? n - 1 - jj : jj))
                  : stitch_scan_identity<OP>();
  }
}

template <bool REVERSE, class Epi>
__device__ __forceinline__ void stitch_scan_store4(const Epi& epi, float* y, int64_t base, int64_t n, int64_t j,
                                                   bool vec, const float v[4]) {
  if (vec && j < n) {
    const int64_t p = REVERSE ? n - 4 - j : j;
    float t[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int q = REVERSE ? 3 - k : k;
      t[q] = epi.apply(v[k], base + p + q);
    }
    stitch_st4(y + base + p, t);
    return;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t jj = j + k;
    if (jj < n) {
      const int64_t e = base + (REVERSE ? n - 1 - jj : jj);
      y[e] = epi.apply(v[k], e);
    }
  }
}

// Scan ITERS chunks of 128 logical elements held by one warp (lane l owns elements 4l..4l+3 of each
// chunk): afterwards v holds the inclusive scan of the warp's segment; returns its total (every lane).
template <int OP, int ITERS>
__device__ __forceinline__ float stitch_scan_warp_segment(float v[ITERS][4]) {
  const int lane = threadIdx.x & 31;
  float carry = stitch_scan_identity<OP>();
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
#pragma unroll
    for (int k = 1; k < 4; ++k) v[it][k] = stitch_scan_op<OP>(v[it][k - 1], v[it][k]);
    const float incl = stitch_warp_scan<OP>(v[it][3]);
    float excl = __shfl_up_sync(STITCH_FULL_MASK, incl, 1);
    if (lane == 0) excl = stitch_scan_identity<OP>();
    const float pre = stitch_scan_op<OP>(carry, excl);
#pragma unroll
    for (int k = 0; k < 4; ++k) v[it][k] = stitch_scan_op<OP>(pre, v[it][k]);
    carry = stitch_scan_op<OP>(carry, __shfl_sync(STITCH_FULL_MASK, incl, 31));
  }
  return carry;
}

// inner == 1, n <= STITCH_SCAN_WARP_ROW_MAX: one warp per row.
template <int OP, bool REVERSE, class Pro, class Epi>
__global__ void stitch_scan_warp_kernel(Pro pro, Epi epi, const bool* mask, float* saved, float* y, int64_t rows,
                                        int64_t n, bool vec) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t stride = (int64_t)gridDim.x * warps;
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < rows; row += stride) {
    const int64_t base = row * n;
    float carry = stitch_scan_identity<OP>();
    for (int64_t j0 = 0; j0 < n; j0 += 128) {
      float v[1][4];
      const int64_t j = j0 + 4 * lane;
      stitch_scan_load4<OP, REVERSE>(pro, mask, saved, base, n, j, vec, v[0]);
      const float total = stitch_scan_warp_segment<OP, 1>(v);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[0][k] = stitch_scan_op<OP>(carry, v[0][k]);
      stitch_scan_store4<REVERSE>(epi, y, base, n, j, vec, v[0]);
      carry = stitch_scan_op<OP>(carry, total);
    }
  }
}

// Look-back status word of a tile: flag in the high 32 bits (0 not ready, 1 tile aggregate, 2 inclusive
// prefix of the row up to and including the tile), the float value's bits in the low 32. One 64-bit word
// so that flag and value are published together.
__device__ __forceinline__ void stitch_scan_publish(unsigned long long* status, int64_t tile, unsigned flag, float v) {
  atomicExch(status + tile, ((unsigned long long)flag << 32) | (unsigned long long)__float_as_uint(v));
}

// inner == 1, long rows: tiles of STITCH_SCAN_TILE logical elements, taken in order through `ticket` (so
// every earlier tile's block is already running: the look-back cannot wait on an unscheduled block).
// Rows of one tile (tiles_per_row 1, `status` and `ticket` null) need neither: block b scans row b, and
// its loads start without waiting for an atomic's round trip.
template <int OP, bool REVERSE, class Pro, class Epi>
__global__ void __launch_bounds__(STITCH_SCAN_THREADS)
    stitch_scan_tile_kernel(Pro pro, Epi epi, const bool* mask, float* saved, float* y, int64_t n,
                            int64_t tiles_per_row, bool vec, unsigned long long* status, unsigned long long* ticket) {
  constexpr int WARPS = STITCH_SCAN_THREADS / 32;
  __shared__ unsigned long long s_tile;
  __shared__ float s_warp[WARPS];
  __shared__ float s_prefix;
  const bool single = tiles_per_row == 1;
  if (!single) {
    if (threadIdx.x == 0) s_tile = atomicAdd(ticket, 1ull);
    __syncthreads();
  }
  const int64_t tile = single ? (int64_t)blockIdx.x : (int64_t)s_tile;
  const int64_t row = tile / tiles_per_row;
  const int64_t chunk = tile - row * tiles_per_row;
  const int64_t base = row * n;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t j0 = chunk * STITCH_SCAN_TILE + (int64_t)warp * (128 * STITCH_SCAN_ITERS) + 4 * lane;
  float v[STITCH_SCAN_ITERS][4];
#pragma unroll
  for (int it = 0; it < STITCH_SCAN_ITERS; ++it) {
    stitch_scan_load4<OP, REVERSE>(pro, mask, saved, base, n, j0 + 128 * it, vec, v[it]);
  }
  const float total = stitch_scan_warp_segment<OP, STITCH_SCAN_ITERS>(v);
  if (lane == 0) s_warp[warp] = total;
  __syncthreads();
  if (warp == 0) {
    const float w = lane < WARPS ? s_warp[lane] : stitch_scan_identity<OP>();
    const float incl = stitch_warp_scan<OP>(w);
    float excl = __shfl_up_sync(STITCH_FULL_MASK, incl, 1);
    if (lane == 0) excl = stitch_scan_identity<OP>();
    const float aggregate = __shfl_sync(STITCH_FULL_MASK, incl, 31);
    if (lane < WARPS) s_warp[lane] = excl;
    if (lane == 0) {
      float prefix = stitch_scan_identity<OP>();
      if (chunk == 0) {
        if (!single) stitch_scan_publish(status, tile, 2u, aggregate);
      } else {
        stitch_scan_publish(status, tile, 1u, aggregate);
        for (int64_t t = tile - 1;; --t) {  // stops at the row's first tile at the latest (it publishes 2)
          unsigned long long s;
          do {
            s = *reinterpret_cast<volatile unsigned long long*>(status + t);
          } while ((s >> 32) == 0ull);
          prefix = stitch_scan_op<OP>(__uint_as_float((unsigned)(s & 0xffffffffull)), prefix);
          if ((s >> 32) == 2ull) break;
        }
        stitch_scan_publish(status, tile, 2u, stitch_scan_op<OP>(prefix, aggregate));
      }
      s_prefix = prefix;
    }
  }
  __syncthreads();
  const float pre = stitch_scan_op<OP>(s_prefix, s_warp[warp]);
#pragma unroll
  for (int it = 0; it < STITCH_SCAN_ITERS; ++it) {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[it][k] = stitch_scan_op<OP>(pre, v[it][k]);
    stitch_scan_store4<REVERSE>(epi, y, base, n, j0 + 128 * it, vec, v[it]);
  }
}

// inner > 1: one thread per (outer, inner) column, walking n; neighbouring threads read neighbouring
// addresses, so every step is one coalesced access per warp. At most 64 registers, four blocks an SM:
// unbounded it took 80, three blocks an SM, and level1/45's 512 blocks (each a whole column's walk) ran
// in two waves, the second with most SMs idle.
template <int OP, bool REVERSE, class Pro, class Epi>
__global__ void __launch_bounds__(256, 4) stitch_scan_cols_kernel(Pro pro, Epi epi, const bool* mask, float* saved, float* y, int64_t outer,
                                        int64_t n, int64_t inner) {
  const int64_t columns = outer * inner;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < columns; c += stride) {
    const int64_t o = c / inner;
    const int64_t base = o * n * inner + (c - o * inner);
    float acc = stitch_scan_identity<OP>();
    for (int64_t j0 = 0; j0 < n; j0 += 8) {  // eight loads in flight before the dependent adds and stores
      float x[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int64_t jj = j0 + k;
        x[k] = jj < n ? stitch_scan_read(pro, mask, saved, base + (REVERSE ? n - 1 - jj : jj) * inner)
                      : stitch_scan_identity<OP>();
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int64_t jj = j0 + k;
        acc = stitch_scan_op<OP>(acc, x[k]);
        if (jj < n) {
          const int64_t e = base + (REVERSE ? n - 1 - jj : jj) * inner;
          y[e] = epi.apply(acc, e);
        }
      }
    }
  }
}

template <int OP, bool REVERSE, class Pro, class Epi>
static int stitch_scan_run(const Pro& pro, const Epi& epi, const bool* mask, float* saved, float* y, int64_t outer,
                           int64_t n, int64_t inner, cudaStream_t stream) {
  if (outer <= 0 || n <= 0 || inner <= 0) return (int)cudaGetLastError();
  if (inner > 1) {
    const unsigned grid = stitch_grid(outer * inner, 256, 0);  // uncapped: one thread per column
    stitch_scan_cols_kernel<OP, REVERSE, Pro, Epi><<<grid, 256, 0, stream>>>(pro, epi, mask, saved, y, outer, n, inner);
    return (int)cudaGetLastError();
  }
  const bool vec = (n & 3) == 0 && pro.vec_ok() && stitch_aligned16(y) && (saved == nullptr || stitch_aligned16(saved)) &&
                   reinterpret_cast<uintptr_t>(mask) % 4 == 0;
  if (n <= STITCH_SCAN_WARP_ROW_MAX) {
    const unsigned grid = stitch_grid_all(outer, STITCH_SCAN_THREADS / 32);
    stitch_scan_warp_kernel<OP, REVERSE, Pro, Epi>
        <<<grid, STITCH_SCAN_THREADS, 0, stream>>>(pro, epi, mask, saved, y, outer, n, vec);
    return (int)cudaGetLastError();
  }
  const int64_t tiles_per_row = (n + STITCH_SCAN_TILE - 1) / STITCH_SCAN_TILE;
  const int64_t tiles = outer * tiles_per_row;
  if (tiles > 2147483647LL) return (int)cudaErrorInvalidConfiguration;
  if (tiles_per_row == 1) {  // one tile a row: no look-back, so no status words, ticket or memset
    stitch_scan_tile_kernel<OP, REVERSE, Pro, Epi><<<(unsigned)tiles, STITCH_SCAN_THREADS, 0, stream>>>(
        pro, epi, mask, saved, y, n, 1, vec, nullptr, nullptr);
    return (int)cudaGetLastError();
  }
  // Stream-ordered scratch (status words + the ticket counter), zeroed on the stream: capturable in a CUDA graph.
  return stitch_with_workspace<unsigned long long>(tiles + 1, stream, [&](unsigned long long* status) {
    cudaError_t err = cudaMemsetAsync(status, 0, (size_t)(tiles + 1) * sizeof(unsigned long long), stream);
    if (err == cudaSuccess) {
      stitch_scan_tile_kernel<OP, REVERSE, Pro, Epi><<<(unsigned)tiles, STITCH_SCAN_THREADS, 0, stream>>>(
          pro, epi, mask, saved, y, n, tiles_per_row, vec, status, status + tiles);
      err = cudaGetLastError();
    }
    return (int)err;
  });
}
