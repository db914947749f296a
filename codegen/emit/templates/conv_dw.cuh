// lib conv_dw: our direct depthwise convolution (one input channel per group, K/C outputs each), the
// conv library's algorithms STITCH_DW_ALGO and STITCH_DW2_ALGO (templates/conv.cuh launches it through
// stitch_dw_launch). A program carries this library only when it has a depthwise convolution
// (codegen/emit/conv.py): its fourteen kernel instances cost the build about a second of device code.
//
// A depthwise convolution moves its input and output once and does a few fmas per element: it is
// memory-bound, and its roof is the copy bandwidth. A block covers whole rows of output (up to 128
// columns) of one plane, or several small planes, and stages the zero-padded input rows it needs in
// shared memory with 16-byte loads, several in flight per thread. Each thread then computes four
// adjacent outputs of 4 rows (or 2: the conv search times both tilings, STITCH_DW_ALGO and STITCH_DW2_ALGO): for the common windows (3x3, 5x5, 7x7 at stride 1 or 2, no
// dilation: compile-time extents) the window slides down the rows in registers, so a staged row is read
// once for every output row it feeds, and the weights sit in registers; other windows loop over their
// taps. Outputs are stored four at a time (16 bytes) where the rows allow it, with the epilogue (bias
// first, residual, ReLU) fused. Each sum starts from the bias and takes the taps row by row with one fma
// each, as PyTorch's depthwise kernel does (a zero-padded tap adds exactly nothing), so the result has
// PyTorch's rounding. Plan, stage and outputs are host / device functions that the CPU emulation runs
// phase by phase (tests/codegen/test_conv_dw.py).

#define STITCH_HAS_DW 1        // the conv library (conv.cuh) times our kernel only where a program holds it
#define STITCH_DW_THREADS 256  // threads a block, at most
#define STITCH_DW_ROWS 4       // output rows a thread by default; the conv search also times 2 (STITCH_DW2_ALGO)
#define STITCH_DW_LOADS 4      // 16-byte staging loads in flight per thread
#define STITCH_DW_SMEM (48 * 1024)

// The tiling of one depthwise problem, computed on the host (stitch_dw_plan) and passed to the kernel.
struct StitchDwPlan {
  int H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW;
  int rows;                // output rows a thread: 4, or 2 (smaller tiles, fewer registers, more blocks an SM)
  int tx, ty, pz;          // threads: tx groups of four output columns, ty groups of `rows` rows, pz planes
  int tile_w, tile_h;      // outputs a block covers in each of its planes
  int tiles_w, tiles_h;    // blocks along a plane's width and height
  int lead;                // staged columns before the first one a window reads (the staging starts 16-byte aligned)
  int rows_in, ld;         // staged rows, and the staged row's length in floats (a multiple of 4)
  int region;              // floats of shared memory a plane takes: its staged rows, then its weights
  int vec_in, vec_out;     // 16-byte global loads / stores allowed (the launcher checks the pointers)
  int variant;             // which compile-time window (stitch_dw_variant), 0: the general loop
  size_t smem;             // bytes a block; 0: the kernel does not apply
};

static inline int stitch_dw_ceil(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

// The compile-time windows: (KH, KW, SH, SW) with unit dilation and the width padded by (KW - 1) / 2 (the
// usual "same" padding); their index + 1 is the plan's variant. The one list: the variant lookup below and
// the kernel dispatch (stitch_dw_dispatch) both read it.
#define STITCH_DW_WINDOW_COUNT 6
static constexpr int STITCH_DW_WINDOWS[STITCH_DW_WINDOW_COUNT][4] = {{3, 3, 1, 1}, {3, 3, 2, 2}, {5, 5, 1, 1},
                                                                     {5, 5, 2, 2}, {7, 7, 1, 1}, {7, 7, 2, 2}};

static inline int stitch_dw_variant(int KH, int KW, int SH, int SW, int PW, int DH, int DW) {
  if (DH != 1 || DW != 1 || PW != (KW - 1) / 2) return 0;  // "same" padding along the width: see the outputs
  for (int i = 0; i < STITCH_DW_WINDOW_COUNT; ++i) {
    const int* v = STITCH_DW_WINDOWS[i];
    if (v[0] == KH && v[1] == KW && v[2] == SH && v[3] == SW) return i + 1;
  }
  return 0;
}

static inline int stitch_dw_region(const StitchDwPlan& p, int ty) {
  const int rows_in = (ty * p.rows - 1) * p.SH + (p.KH - 1) * p.DH + 1;
  return (rows_in * p.ld + p.KH * p.KW + 3) / 4 * 4;  // a multiple of 4: every plane's tile is 16-byte aligned
}

// The tiling for a 2-D problem (1-D: H = OH = KH = 1) of `planes` output planes (images x output channels),
// `rows` (4 or 2) output rows a thread.
static inline StitchDwPlan stitch_dw_plan(int H, int W, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW,
                                          int DH, int DW, int64_t planes, int rows = STITCH_DW_ROWS) {
  StitchDwPlan p = {};
  p.H = H, p.W = W, p.OH = OH, p.OW = OW, p.KH = KH, p.KW = KW, p.SH = SH, p.SW = SW;
  p.PH = PH, p.PW = PW, p.DH = DH, p.DW = DW;
  p.rows = rows == 2 ? 2 : 4;
  if (OH < 1 || OW < 1 || planes < 1) return p;
  const int ty_need = stitch_dw_ceil(OH, p.rows);
  const int ty_min = ty_need < 8 ? ty_need : 8;  // short planes leave threads to the width
  const int groups = stitch_dw_ceil(OW, 4);
  p.tx = groups < STITCH_DW_THREADS / ty_min ? groups : STITCH_DW_THREADS / ty_min;
  p.tile_w = 4 * p.tx;
  p.tiles_w = stitch_dw_ceil(OW, p.tile_w);
  // Every block's first window column, ow0 * SW - PW with ow0 a multiple of 4, sits PW mod 4 columns past
  // a 16-byte boundary to its left: staging starts at that boundary.
  p.lead = (4 - PW % 4) % 4;
  p.ld = (p.lead + (p.tile_w - 1) * SW + (KW - 1) * DW + 1 + 3) / 4 * 4;
  int ty = STITCH_DW_THREADS / p.tx < ty_need ? STITCH_DW_THREADS / p.tx : ty_need;
  while (ty > 0 && (size_t)stitch_dw_region(p, ty) * sizeof(float) > STITCH_DW_SMEM) --ty;
  if (ty == 0) return p;  // a window too tall or wide for shared memory: cuDNN only
  p.ty = ty;
  p.tile_h = ty * p.rows;
  p.tiles_h = stitch_dw_ceil(OH, p.tile_h);
  p.rows_in = (p.tile_h - 1) * SH + (KH - 1) * DH + 1;
  p.region = stitch_dw_region(p, ty);
  p.pz = 1;
  if (p.tiles_w == 1 && p.tiles_h == 1) {  // small planes: several a block
    int pz = STITCH_DW_THREADS / (p.tx * p.ty);
    const int fit = (int)(STITCH_DW_SMEM / ((size_t)p.region * sizeof(float)));
    if (pz > fit) pz = fit;
    if (pz > planes) pz = (int)planes;
    p.pz = pz < 1 ? 1 : pz;
  }
  p.variant = stitch_dw_variant(KH, KW, SH, SW, PW, DH, DW);
  p.smem = (size_t)p.pz * p.region * sizeof(float);
  return p;
}

// Where plane slot z of block `block` works: its plane (image * K + output channel), input channel, first
// output row and column, and the first staged input row and (16-byte aligned) column.
struct StitchDwBlock {
  int64_t plane, image;
  int oc, ic, oh0, ow0, ih0, a0;
};

__host__ __device__ __forceinline__ StitchDwBlock stitch_dw_block(int64_t block, int z, const StitchDwPlan& p, int C,
                                                                  int K) {
  StitchDwBlock b;
  const int tw = (int)(block % p.tiles_w);
  block /= p.tiles_w;
  const int th = (int)(block % p.tiles_h);
  b.plane = block / p.tiles_h * p.pz + z;
  b.oc = (int)(b.plane % K);
  b.image = b.plane / K;
  b.ic = b.oc / (K / C);
  b.oh0 = th * p.tile_h;
  b.ow0 = tw * p.tile_w;
  b.ih0 = b.oh0 * p.SH - p.PH;
  b.a0 = b.ow0 * p.SW - p.PW - p.lead;
  return b;
}

// Four consecutive floats of an input row at columns col..col+3 (zero outside the row), one 16-byte load
// when all four are inside and the plan allows it.
__device__ __forceinline__ void stitch_dw_load4(const float* __restrict__ row, int col, int W, int vec, float v[4]) {
  if (vec && col >= 0 && col + 3 < W) {
#ifdef STITCH_HOST_EMULATION
    for (int k = 0; k < 4; ++k) v[k] = row[col + k];
#else
    const float4 q = __ldg(reinterpret_cast<const float4*>(row + col));
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
#endif
    return;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = (col + k >= 0 && col + k < W) ? __ldg(row + col + k) : 0.f;
}

// Thread `tid` (of `nthreads` in its plane slot)'s share of the staging: 16-byte chunks tid, tid + nthreads,
// ... of the rows_in x ld tile (chunk q lands at tile[4q]), STITCH_DW_LOADS chunks loaded before any is
// stored; rows outside the input are zeros. The chunk's (row, column) advances with one carry (lib common's
// stitch_advance), so no division per chunk.
__device__ __forceinline__ void stitch_dw_stage(const float* __restrict__ xp, float* tile, const StitchDwPlan& p,
                                                int ih0, int a0, int tid, int nthreads) {
  const int cw = p.ld / 4, n = p.rows_in * cw;
  const int dr = nthreads / cw, dc = nthreads - dr * cw;
  int r = tid / cw, c = tid - r * cw;
  for (int first = tid; first < n; first += STITCH_DW_LOADS * nthreads) {
    float v[STITCH_DW_LOADS][4];
#pragma unroll
    for (int k = 0; k < STITCH_DW_LOADS; ++k) {
      const int ih = ih0 + r;
      if (first + k * nthreads < n && ih >= 0 && ih < p.H) {
        stitch_dw_load4(xp + (int64_t)ih * p.W, a0 + 4 * c, p.W, p.vec_in, v[k]);
      } else {
        v[k][0] = v[k][1] = v[k][2] = v[k][3] = 0.f;
      }
      stitch_advance(r, c, dr, dc, cw);
    }
#pragma unroll
    for (int k = 0; k < STITCH_DW_LOADS; ++k) {
      const int q = first + k * nthreads;
      if (q < n) {
#ifdef STITCH_HOST_EMULATION
        for (int e = 0; e < 4; ++e) tile[4 * q + e] = v[k][e];
#else
        reinterpret_cast<float4*>(tile)[q] = make_float4(v[k][0], v[k][1], v[k][2], v[k][3]);
#endif
      }
    }
  }
}

// Four floats of a 16-byte aligned shared-memory address, one load.
__device__ __forceinline__ void stitch_dw_lds4(const float* at, float v[4]) {
#ifdef STITCH_HOST_EMULATION
  for (int k = 0; k < 4; ++k) v[k] = at[k];
#else
  const float4 q = *reinterpret_cast<const float4*>(at);
  v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
#endif
}

// Four outputs of one row, e..e+3, with the epilogue: the residual, then ReLU; 16 bytes at a time where the
// plan allows it and all four exist, else one by one up to the row's end (`valid` of them).
__device__ __forceinline__ void stitch_dw_store4(float acc[4], const float* __restrict__ z, float* __restrict__ y,
                                                 int64_t e, int valid, int vec, int act) {
  if (vec && valid >= 4) {
#ifndef STITCH_HOST_EMULATION
    if (z != nullptr) {
      const float4 r = __ldg(reinterpret_cast<const float4*>(z + e));
      acc[0] += r.x, acc[1] += r.y, acc[2] += r.z, acc[3] += r.w;
    }
    float4 o;
    o.x = (act == 1 && acc[0] < 0.f) ? 0.f : acc[0];
    o.y = (act == 1 && acc[1] < 0.f) ? 0.f : acc[1];
    o.z = (act == 1 && acc[2] < 0.f) ? 0.f : acc[2];
    o.w = (act == 1 && acc[3] < 0.f) ? 0.f : acc[3];
    *reinterpret_cast<float4*>(y + e) = o;
    return;
#endif
  }
  for (int v = 0; v < 4 && v < valid; ++v) {
    float s = acc[v];
    if (z != nullptr) s += z[e + v];
    y[e + v] = (act == 1 && s < 0.f) ? 0.f : s;
  }
}

// Thread (tx, ty)'s outputs in its plane: columns ow0 + 4 tx .. + 3 of the ROWS rows from oh0 + ty * ROWS
// (ROWS: the plan's rows), from the staged tile and the weights (after the tile, in shared memory).
// KH_ .. SW_ > 0: a compile-time window with unit dilation. Staged row q feeds output row rr through weight
// row i = q - rr * SH; q rises, so each output takes its weight rows in order i = 0, 1, ..., and within a
// row the columns in order: PyTorch's summation order, as in the general loop below.
template <int KH_, int KW_, int SH_, int SW_, int ROWS>
__device__ __forceinline__ void stitch_dw_outputs(const float* tile, float start, const float* __restrict__ z,
                                                  float* __restrict__ y, int64_t out_plane, int oh0, int ow0,
                                                  const StitchDwPlan& p, int act, int tx, int ty) {
  const int ow = ow0 + 4 * tx;
  if (ow >= p.OW || 4 * tx >= p.tile_w) return;
  const float* weights = tile + p.rows_in * p.ld;
  const int first = ty * ROWS;  // the thread's first output row within the tile
  const int col0 = p.lead + 4 * tx * p.SW;
  float acc[ROWS][4];
#pragma unroll
  for (int rr = 0; rr < ROWS; ++rr)
#pragma unroll
    for (int v = 0; v < 4; ++v) acc[rr][v] = start;
  if constexpr (KH_ > 0) {
    // The staged columns the four outputs' windows cover start LEAD columns into a 16-byte chunk (the
    // padding is (KW - 1) / 2, so LEAD is the plan's lead): a row's share is read as NV whole chunks,
    // conflict-free 16-byte shared loads, where four-byte loads 4 * SW words apart across the lanes would
    // meet 4 * SW - way bank conflicts.
    constexpr int SPAN = 3 * SW_ + KW_;
    constexpr int LEAD = (4 - ((KW_ - 1) / 2) % 4) % 4;
    constexpr int NV = (LEAD + SPAN + 3) / 4;
    float wr[KH_ * KW_];
#pragma unroll
    for (int i = 0; i < KH_ * KW_; ++i) wr[i] = weights[i];
    const float* rows = tile + (first * SH_) * p.ld + col0 - LEAD;  // 16-byte aligned
#pragma unroll
    for (int q = 0; q < (ROWS - 1) * SH_ + KH_; ++q) {
      float c[4 * NV];
#pragma unroll
      for (int k = 0; k < NV; ++k) stitch_dw_lds4(rows + q * p.ld + 4 * k, c + 4 * k);
      const float* t = c + LEAD;
#pragma unroll
      for (int rr = 0; rr < ROWS; ++rr) {
        const int i = q - rr * SH_;
        if (i >= 0 && i < KH_) {
#pragma unroll
          for (int j = 0; j < KW_; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[rr][v] = fmaf(t[v * SW_ + j], wr[i * KW_ + j], acc[rr][v]);
        }
      }
    }
  } else {
#pragma unroll
    for (int rr = 0; rr < ROWS; ++rr) {
      const float* base = tile + (first + rr) * p.SH * p.ld + col0;
      for (int i = 0; i < p.KH; ++i)
        for (int j = 0; j < p.KW; ++j) {
          const float wv = weights[i * p.KW + j];
#pragma unroll
          for (int v = 0; v < 4; ++v) acc[rr][v] = fmaf(base[i * p.DH * p.ld + v * p.SW + j * p.DW], wv, acc[rr][v]);
        }
    }
  }
#pragma unroll
  for (int rr = 0; rr < ROWS; ++rr) {
    const int oh = oh0 + first + rr;
    if (first + rr >= p.tile_h || oh >= p.OH) break;
    stitch_dw_store4(acc[rr], z, y, out_plane + (int64_t)oh * p.OW + ow, p.OW - ow, p.vec_out, act);
  }
}

// Calls f(StitchDwInt<KH>(), StitchDwInt<KW>(), StitchDwInt<SH>(), StitchDwInt<SW>(), StitchDwInt<ROWS>()) for
// the plan's compile-time window (all zeros: the general loop) and rows; the launcher and the CPU emulation
// both dispatch here.
template <int N>
struct StitchDwInt {
  static constexpr int value = N;
};

// Variant V's window (V > 0) or the general loop (V = 0) as compile-time arguments of f.
template <int V, int ROWS, class F>
inline void stitch_dw_call(F&& f) {
  if constexpr (V == 0) {
    f(StitchDwInt<0>(), StitchDwInt<0>(), StitchDwInt<0>(), StitchDwInt<0>(), StitchDwInt<ROWS>());
  } else {
    f(StitchDwInt<STITCH_DW_WINDOWS[V - 1][0]>(), StitchDwInt<STITCH_DW_WINDOWS[V - 1][1]>(),
      StitchDwInt<STITCH_DW_WINDOWS[V - 1][2]>(), StitchDwInt<STITCH_DW_WINDOWS[V - 1][3]>(), StitchDwInt<ROWS>());
  }
}

// The plan's variant, found among 1 .. STITCH_DW_WINDOW_COUNT at compile time (0 and anything else: the loop).
template <int ROWS, int V = STITCH_DW_WINDOW_COUNT, class F>
inline void stitch_dw_dispatch_window(int variant, F&& f) {
  if constexpr (V == 0) {
    stitch_dw_call<0, ROWS>(f);
  } else if (variant == V) {
    stitch_dw_call<V, ROWS>(f);
  } else {
    stitch_dw_dispatch_window<ROWS, V - 1>(variant, f);
  }
}

template <class F>
inline void stitch_dw_dispatch(const StitchDwPlan& p, F&& f) {
  if (p.rows == 2) {
    stitch_dw_dispatch_window<2>(p.variant, f);
  } else {
    stitch_dw_dispatch_window<4>(p.variant, f);
  }
}

#ifndef STITCH_HOST_EMULATION
template <int KH_, int KW_, int SH_, int SW_, int ROWS>
__global__ void __launch_bounds__(STITCH_DW_THREADS) stitch_conv_depthwise_kernel(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    const float* __restrict__ z, float* __restrict__ y, int C, int K, int64_t planes, StitchDwPlan p, int act) {
  extern __shared__ float4 stitch_dw_shared[];
  float* tile = reinterpret_cast<float*>(stitch_dw_shared) + threadIdx.z * p.region;
  const StitchDwBlock b = stitch_dw_block(blockIdx.x, threadIdx.z, p, C, K);
  const bool live = b.plane < planes;  // the last block's spare plane slots stage and compute nothing
  const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
  if (live) {
    float* weights = tile + p.rows_in * p.ld;
    for (int i = tid; i < p.KH * p.KW; i += nthreads) weights[i] = w[(int64_t)b.oc * p.KH * p.KW + i];
    stitch_dw_stage(x + (b.image * C + b.ic) * (int64_t)p.H * p.W, tile, p, b.ih0, b.a0, tid, nthreads);
  }
  __syncthreads();
  if (live) {
    const float start = bias != nullptr ? bias[b.oc] : 0.f;
    stitch_dw_outputs<KH_, KW_, SH_, SW_, ROWS>(tile, start, z, y, b.plane * (int64_t)p.OH * p.OW, b.oh0, b.ow0, p, act,
                                          threadIdx.x, threadIdx.y);
  }
}
#endif  // STITCH_HOST_EMULATION
