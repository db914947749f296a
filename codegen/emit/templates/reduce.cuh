// lib reduce: sum / mean / amax / amin / prod of a [outer, R, inner] row-major view over R.
// OP: 0 sum (times `scale`: 1 for sum, 1/R for mean), 1 max, 2 min, 3 product. Pro::load(e) reads input element e;
// Epi::apply(v, o) transforms output element o.

template <int OP>
__device__ __forceinline__ float stitch_reduce_identity() {
  return OP == 0 ? 0.f : (OP == 1 ? -INFINITY : (OP == 2 ? INFINITY : 1.f));
}

template <int OP>
__device__ __forceinline__ float stitch_reduce_op(float a, float b) {
  return OP == 0 ? a + b : (OP == 1 ? stitch_max(a, b) : (OP == 2 ? stitch_min(a, b) : a * b));
}

template <int OP>
struct StitchReduceOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return stitch_reduce_op<OP>(a, b); }
};

template <int OP>
__device__ __forceinline__ float stitch_reduce_finish(float acc, float scale) {
  return OP == 0 ? acc * scale : acc;
}

// inner == 1, short rows: one warp per row.
template <int OP, class Pro, class Epi>
__global__ void stitch_reduce_warp_kernel(Pro pro, Epi epi, float* y, int64_t rows, int64_t cols, float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t stride = (int64_t)gridDim.x * warps;
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < rows; row += stride) {
    const int64_t base = row * cols;
    float acc = stitch_reduce_identity<OP>();
    for (int64_t c = lane; c < cols; c += 32) acc = stitch_reduce_op<OP>(acc, pro.load(base + c));
    acc = stitch_warp_reduce(acc, StitchReduceOp<OP>());
    if (lane == 0) y[row] = epi.apply(stitch_reduce_finish<OP>(acc, scale), row);
  }
}

// inner == 1, long rows: one block per row.
template <int OP, class Pro, class Epi>
__global__ void stitch_reduce_block_kernel(Pro pro, Epi epi, float* y, int64_t rows, int64_t cols, float scale) {
  __shared__ float red[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * cols;
    float acc = stitch_reduce_identity<OP>();
    stitch_sweep<4, 1>(pro, nullptr, base, threadIdx.x, cols, blockDim.x,
                       [&](const float* t, int64_t) { acc = stitch_reduce_op<OP>(acc, t[0]); });
    acc = stitch_block_reduce(acc, StitchReduceOp<OP>(), stitch_reduce_identity<OP>(), red);
    if (threadIdx.x == 0) y[row] = epi.apply(stitch_reduce_finish<OP>(acc, scale), row);
  }
}

// inner == 1, rows of float4 (cols % 4 == 0, Pro::vec_ok()): each thread folds float4 chunks,
// four independent accumulators so that loads stay in flight. ROW_THREADS threads per row (32 or the block).
template <int OP, bool WARP, class Pro, class Epi>
__global__ void stitch_reduce_rows4_kernel(Pro pro, Epi epi, float* y, int64_t rows, int64_t cols, float scale) {
  __shared__ float red[32];
  const int64_t per_block = WARP ? (blockDim.x >> 5) : 1;
  const int64_t stride = (int64_t)gridDim.x * per_block;
  const int tid = WARP ? (threadIdx.x & 31) : threadIdx.x;
  const int nthreads = WARP ? 32 : blockDim.x;
  const int64_t cols4 = cols / 4;
  for (int64_t row = (int64_t)blockIdx.x * per_block + (WARP ? (threadIdx.x >> 5) : 0); row < rows; row += stride) {
    const int64_t base = row * cols;
    float acc[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[k] = stitch_reduce_identity<OP>();
    stitch_sweep<4, 4>(pro, nullptr, base, 4 * (int64_t)tid, 4 * cols4, 4 * (int64_t)nthreads,
                       [&](const float* t, int64_t) {
#pragma unroll
                         for (int k = 0; k < 4; ++k) acc[k] = stitch_reduce_op<OP>(acc[k], t[k]);
                       });
    float a = stitch_reduce_op<OP>(stitch_reduce_op<OP>(acc[0], acc[1]), stitch_reduce_op<OP>(acc[2], acc[3]));
    if (WARP) {
      a = stitch_warp_reduce(a, StitchReduceOp<OP>());
    } else {
      a = stitch_block_reduce(a, StitchReduceOp<OP>(), stitch_reduce_identity<OP>(), red);
    }
    if (tid == 0) y[row] = epi.apply(stitch_reduce_finish<OP>(a, scale), row);
  }
}

// inner > 1: 32 columns per block in x, 8 threads in y share each column's R elements (rows ty, ty + 8,
// ..., four loads in flight), folded in order of ty.
template <int OP, class Pro, class Epi>
__global__ void stitch_reduce_cols_kernel(Pro pro, Epi epi, float* y, int64_t outer, int64_t R, int64_t inner,
                                          float scale) {
  __shared__ float part[8][33];
  const int64_t i = (int64_t)blockIdx.x * 32 + threadIdx.x;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float acc = stitch_reduce_identity<OP>();
    if (i < inner) {
      stitch_sweep<4, 1>(pro, nullptr, o * R * inner + i, threadIdx.y * inner, R * inner, 8 * inner,
                         [&](const float* t, int64_t) { acc = stitch_reduce_op<OP>(acc, t[0]); });
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      float total = part[0][threadIdx.x];
#pragma unroll
      for (int k = 1; k < 8; ++k) total = stitch_reduce_op<OP>(total, part[k][threadIdx.x]);
      y[o * inner + i] = epi.apply(stitch_reduce_finish<OP>(total, scale), o * inner + i);
    }
    __syncthreads();
  }
}

// inner > 1, inner a multiple of 4 and the operands 16-byte aligned: as the kernel above (the same
// summation order), but each thread owns 4 adjacent columns read as one float4, 128 columns a block, so a
// warp moves 512 bytes a load instead of 128.
template <int OP, class Pro, class Epi>
__global__ void stitch_reduce_cols4_kernel(Pro pro, Epi epi, float* y, int64_t outer, int64_t R, int64_t inner,
                                           float scale) {
  __shared__ float4 part[8][32];
  const int64_t i = ((int64_t)blockIdx.x * 32 + threadIdx.x) * 4;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float acc[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[k] = stitch_reduce_identity<OP>();
    if (i < inner) {
      stitch_sweep<4, 4>(pro, nullptr, o * R * inner + i, threadIdx.y * inner, R * inner, 8 * inner,
                         [&](const float* t, int64_t) {
#pragma unroll
                           for (int k = 0; k < 4; ++k) acc[k] = stitch_reduce_op<OP>(acc[k], t[k]);
                         });
    }
    part[threadIdx.y][threadIdx.x] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      for (int q = 1; q < 8; ++q) {
        const float4 p = part[q][threadIdx.x];
        acc[0] = stitch_reduce_op<OP>(acc[0], p.x);
        acc[1] = stitch_reduce_op<OP>(acc[1], p.y);
        acc[2] = stitch_reduce_op<OP>(acc[2], p.z);
        acc[3] = stitch_reduce_op<OP>(acc[3], p.w);
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t e = o * inner + i + k;
        y[e] = epi.apply(stitch_reduce_finish<OP>(acc[k], scale), e);
      }
    }
    __syncthreads();
  }
}

// Few outputs over many elements (a full reduction, a first-dim sum of a narrow tensor): each output's R
// elements are split into `parts` chunks reduced by separate blocks into the workspace `ws`
// (ws[output * parts + part]), then stitch_reduce_finish_kernel folds the parts in order (deterministic).
// inner == 1: one block per (row, part); 16-byte loads when `vec` (R and chunk multiples of 4).
template <int OP, class Pro>
__global__ void stitch_reduce_part_rows_kernel(Pro pro, float* ws, int64_t rows, int64_t R, int64_t parts,
                                               int64_t chunk, bool vec) {
  __shared__ float red[32];
  for (int64_t w = blockIdx.x; w < rows * parts; w += gridDim.x) {
    const StitchRowPart rp = stitch_row_part(w, parts, chunk, R);
    const int64_t base = rp.base, lo = rp.lo, hi = rp.hi;
    float acc[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[k] = stitch_reduce_identity<OP>();
    if (vec) {
      stitch_sweep<4, 4>(pro, nullptr, base, lo + 4 * (int64_t)threadIdx.x, hi, 4 * (int64_t)blockDim.x,
                         [&](const float* t, int64_t) {
#pragma unroll
                           for (int k = 0; k < 4; ++k) acc[k] = stitch_reduce_op<OP>(acc[k], t[k]);
                         });
    } else {
      stitch_sweep<4, 1>(pro, nullptr, base, lo + threadIdx.x, hi, blockDim.x,
                         [&](const float* t, int64_t) { acc[0] = stitch_reduce_op<OP>(acc[0], t[0]); });
    }
    float a = stitch_reduce_op<OP>(stitch_reduce_op<OP>(acc[0], acc[1]), stitch_reduce_op<OP>(acc[2], acc[3]));
    a = stitch_block_reduce(a, StitchReduceOp<OP>(), stitch_reduce_identity<OP>(), red);
    if (threadIdx.x == 0) ws[w] = a;
  }
}

// inner > 1: 32 adjacent columns per block, blockDim.y threads per column, gridDim.z parts of R.
template <int OP, class Pro>
__global__ void stitch_reduce_part_cols_kernel(Pro pro, float* ws, int64_t outer, int64_t R, int64_t inner,
                                               int64_t parts, int64_t chunk) {
  __shared__ float part[32][33];
  const int64_t i = (int64_t)blockIdx.x * 32 + threadIdx.x;
  const int64_t lo = (int64_t)blockIdx.z * chunk;
  const int64_t hi = lo + chunk < R ? lo + chunk : R;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float acc = stitch_reduce_identity<OP>();
    if (i < inner) {
#pragma unroll 4
      for (int64_t r = lo + threadIdx.y; r < hi; r += blockDim.y) acc = stitch_reduce_op<OP>(acc, pro.load((o * R + r) * inner + i));
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      for (int k = 1; k < (int)blockDim.y; ++k) acc = stitch_reduce_op<OP>(acc, part[k][threadIdx.x]);
      ws[(o * inner + i) * parts + blockIdx.z] = acc;
    }
    __syncthreads();
  }
}

// One warp per output: folds its parts, scales, applies the epilogue.
template <int OP, class Epi>
__global__ void stitch_reduce_finish_kernel(Epi epi, const float* ws, float* y, int64_t outputs, int64_t parts,
                                            float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t stride = (int64_t)gridDim.x * warps;
  for (int64_t o = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); o < outputs; o += stride) {
    float acc = stitch_reduce_identity<OP>();
    for (int64_t p = lane; p < parts; p += 32) acc = stitch_reduce_op<OP>(acc, ws[o * parts + p]);
    acc = stitch_warp_reduce(acc, StitchReduceOp<OP>());
    if (lane == 0) y[o] = epi.apply(stitch_reduce_finish<OP>(acc, scale), o);
  }
}

static inline int64_t stitch_reduce_div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The split path when it pays (fewer outputs' blocks than two per SM and long enough parts); returns
// -1 when the caller should use the single-pass kernels.
template <int OP, class Pro, class Epi>
static int stitch_reduce_split(const Pro& pro, const Epi& epi, float* y, int64_t outer, int64_t R, int64_t inner,
                               float scale, int threads, cudaStream_t stream) {
  const int64_t tiles = stitch_reduce_div_up(inner, 32);
  const bool rows = inner == 1;
  const int64_t least = rows ? 8192 : 512;  // elements a part at least
  int64_t parts = 0;
  int64_t chunk = 0;
  if (tiles > 2147483647LL || !stitch_plan_parts(rows ? outer : tiles * outer, R, least, rows, &parts, &chunk)) {
    return -1;
  }
  const int64_t outputs = outer * inner;
  return stitch_with_workspace<float>(outputs * parts, stream, [&](float* ws) {
    if (rows) {
      const bool vec = (R & 3) == 0 && pro.vec_ok();
      stitch_reduce_part_rows_kernel<OP, Pro><<<stitch_grid_all(outer * parts, 1), threads, 0, stream>>>(
          pro, ws, outer, R, parts, chunk, vec);
    } else {
      const dim3 grid((unsigned)tiles, (unsigned)(outer < 65535 ? outer : 65535), (unsigned)parts);
      stitch_reduce_part_cols_kernel<OP, Pro><<<grid, dim3(32, 32), 0, stream>>>(pro, ws, outer, R, inner, parts,
                                                                                 chunk);
    }
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) {
      stitch_reduce_finish_kernel<OP, Epi><<<stitch_grid_all(outputs, 8), 256, 0, stream>>>(epi, ws, y, outputs,
                                                                                             parts, scale);
      err = cudaGetLastError();
    }
    return (int)err;
  });
}

template <int OP, class Pro, class Epi>
// knob_threads: the block-per-row kernels' threads from the launch table (0: by the row length); the
// warp and column kernels keep theirs.
static int stitch_reduce_run(const Pro& pro, const Epi& epi, float* y, int64_t outer, int64_t R, int64_t inner,
                             float scale, int knob_threads, cudaStream_t stream) {
  if (outer <= 0 || inner <= 0) return (int)cudaGetLastError();
  if (R > 0) {
    const int split = stitch_reduce_split<OP, Pro, Epi>(pro, epi, y, outer, R, inner, scale,
                                                        stitch_threads_or(knob_threads, 512), stream);
    if (split >= 0) return split;
  }
  if (inner == 1) {
    if ((R & 3) == 0 && pro.vec_ok()) {
      if (R >= 2048) {
        const int threads = stitch_threads_or(knob_threads, R >= 32768 ? 1024 : (R >= 8192 ? 512 : 256));
        stitch_reduce_rows4_kernel<OP, false, Pro, Epi><<<stitch_grid_all(outer, 1), threads, 0, stream>>>(
            pro, epi, y, outer, R, scale);
      } else {
        stitch_reduce_rows4_kernel<OP, true, Pro, Epi><<<stitch_grid_all(outer, 8), 256, 0, stream>>>(
            pro, epi, y, outer, R, scale);
      }
      return (int)cudaGetLastError();
    }
    if (R >= 4096) {
      const int threads = stitch_threads_or(knob_threads, R >= 32768 ? 1024 : 256);
      stitch_reduce_block_kernel<OP, Pro, Epi><<<stitch_grid_all(outer, 1), threads, 0, stream>>>(pro, epi, y, outer, R,
                                                                                                  scale);
    } else {
      stitch_reduce_warp_kernel<OP, Pro, Epi><<<stitch_grid_all(outer, 8), 256, 0, stream>>>(pro, epi, y, outer, R,
                                                                                            scale);
    }
    return (int)cudaGetLastError();
  }
  const bool cols4 = (inner & 3) == 0 && pro.vec_ok();
  const int64_t tiles = (inner + (cols4 ? 127 : 31)) / (cols4 ? 128 : 32);
  if (tiles > 2147483647LL) return (int)cudaErrorInvalidValue;
  const int64_t gy = outer < 65535 ? outer : 65535;
  dim3 grid((unsigned)tiles, (unsigned)gy);
  dim3 block(32, 8);
  if (cols4) {
    stitch_reduce_cols4_kernel<OP, Pro, Epi><<<grid, block, 0, stream>>>(pro, epi, y, outer, R, inner, scale);
  } else {
    stitch_reduce_cols_kernel<OP, Pro, Epi><<<grid, block, 0, stream>>>(pro, epi, y, outer, R, inner, scale);
  }
  return (int)cudaGetLastError();
}
