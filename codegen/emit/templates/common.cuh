// lib common: helpers shared by every StitchCUDA kernel (torch-free; CUDA runtime only).
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#define STITCH_FULL_MASK 0xffffffffu

// Attribute ATTR of the current device, cached per device (one cache per attribute); `fallback` (an
// H200's value) when the query fails.
template <cudaDeviceAttr ATTR>
static inline int stitch_device_attr(int fallback) {
  static int cached[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    (void)cudaGetLastError();
    return fallback;
  }
  if (cached[dev] == 0) {
    int value = 0;
    if (cudaDeviceGetAttribute(&value, ATTR, dev) != cudaSuccess || value <= 0) {
      (void)cudaGetLastError();
      value = fallback;
    }
    cached[dev] = value;
  }
  return cached[dev];
}

static inline int stitch_sm_count() { return stitch_device_attr<cudaDevAttrMultiProcessorCount>(132); }

static inline int64_t stitch_l2_bytes() { return stitch_device_attr<cudaDevAttrL2CacheSize>(50 << 20); }

// Whether, with one row per SM, the `reread_bytes` of each row that a block reads twice (a row kernel's
// statistics pass, then its output pass) stay in L2 meanwhile: at least a row per SM, and those bytes
// of the rows in flight within 60% of L2, the rest left for the outputs streaming through. Then a
// fused block-per-row kernel reads DRAM once where a statistics and an output kernel read it twice.
static inline bool stitch_rows_stay_in_l2(int64_t rows, int64_t reread_bytes) {
  const int64_t sms = stitch_sm_count();
  return rows >= sms && reread_bytes * sms <= stitch_l2_bytes() * 3 / 5;
}

// The long-row kernels (lib softmax, lib groupnorm) keep each row's head in opt-in dynamic shared memory
// and read its tail again from L2. The head in floats (a multiple of 4) for rows of `cols` floats beside
// `static_bytes` of the kernel's static slots, or -1 when the rows do not qualify (fewer than one per SM,
// or tails in flight too large for L2).
static inline int64_t stitch_long_row_head(int64_t rows, int64_t cols, int64_t static_bytes) {
  const int64_t optin = stitch_device_attr<cudaDevAttrMaxSharedMemoryPerBlockOptin>(232448);
  int64_t head = (optin - static_bytes) / (int64_t)sizeof(float);
  head = (head < cols ? head : cols) & ~3LL;
  if (head < 0) head = 0;
  return stitch_rows_stay_in_l2(rows, (cols - head) * (int64_t)sizeof(float)) ? head : -1;
}

// Raise `kernel`'s dynamic shared memory limit to `bytes`, once per device: `granted` is the caller's own
// record, a static of the kernel's instantiation. False (the error cleared) when it cannot be raised.
template <class Kernel>
static bool stitch_grant_smem(Kernel kernel, size_t bytes, size_t (&granted)[64]) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    (void)cudaGetLastError();
    return false;
  }
  if (granted[dev] >= bytes) return true;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  granted[dev] = bytes;
  return true;
}

// Blocks for a grid-stride loop over `work` items: enough to fill the GPU, never more than needed.
// blocks_per_sm <= 0: no cap, one block per `threads` items (a streaming kernel with one item per
// thread: on an H100 a grid capped at 8 or 16 blocks per SM streamed 7% slower than this).
static inline unsigned stitch_grid(int64_t work, int threads, int blocks_per_sm) {
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks_per_sm > 0) {
    const int64_t cap = (int64_t)stitch_sm_count() * blocks_per_sm;
    if (blocks > cap) blocks = cap;
  }
  if (blocks > 2147483647LL) blocks = 2147483647LL;
  if (blocks < 1) blocks = 1;
  return (unsigned)blocks;
}

// A grid-stride launch's configuration as the program's STITCH_LAUNCH table sets it (docs/autotuning.md):
// threads per block and the grid's cap in blocks per SM. A value out of range keeps the default.
struct StitchLaunch {
  int threads;
  int per_sm;
};

// Threads per block from the launch table when usable (a multiple of 32 up to 1024), else `fallback`.
static inline int stitch_threads_or(int asked, int fallback) {
  return asked >= 32 && asked <= 1024 && asked % 32 == 0 ? asked : fallback;
}

static inline StitchLaunch stitch_launch_or(StitchLaunch asked, int threads, int per_sm) {
  StitchLaunch c{threads, per_sm};
  if (asked.threads >= 32 && asked.threads <= 1024 && asked.threads % 32 == 0) c.threads = asked.threads;
  if (asked.per_sm >= 1 && asked.per_sm <= 64) c.per_sm = asked.per_sm;
  return c;
}

// Blocks for one work item per `per_block` slots with no grid-stride reuse (bandwidth-bound kernels want
// every row or vector in flight at once); kernels still loop in case the grid limit is reached.
static inline unsigned stitch_grid_all(int64_t work, int per_block) {
  int64_t blocks = (work + per_block - 1) / per_block;
  if (blocks > 2147483647LL) blocks = 2147483647LL;
  if (blocks < 1) blocks = 1;
  return (unsigned)blocks;
}

// Cutting long rows into parts: `blocks` blocks would cover the work one per row (or tile); when they
// fill less than two blocks per SM and each of the R elements can be cut into parts of at least `least`,
// *parts (at most 65535) parts of *chunk elements each (a multiple of 4 when `align4`) fill it instead.
// False: no split, one block per row.
static inline bool stitch_plan_parts(int64_t blocks, int64_t R, int64_t least, bool align4, int64_t* parts,
                                     int64_t* chunk) {
  const int64_t want = 2LL * stitch_sm_count();
  if (blocks >= want || R < 2 * least) return false;
  int64_t p = (want + blocks - 1) / blocks;
  const int64_t most = (R + least - 1) / least;
  if (p > most) p = most;
  if (p > 65535) p = 65535;
  int64_t c = (R + p - 1) / p;
  if (align4) c = (c + 3) & ~3LL;
  p = (R + c - 1) / c;
  if (p < 2) return false;
  *parts = p;
  *chunk = c;
  return true;
}

__host__ __device__ __forceinline__ bool stitch_aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Index into a broadcast operand: element e of the output reads operand[(e / inner) % count].
__device__ __forceinline__ int64_t stitch_bidx(int64_t e, int64_t inner, int64_t count) {
  if (((uint64_t)e | (uint64_t)inner | (uint64_t)count) >> 32 == 0) {
    return (int64_t)(((uint32_t)e / (uint32_t)inner) % (uint32_t)count);
  }
  return (e / inner) % count;
}

__device__ __forceinline__ void stitch_ld4(const float* p, float v[4]) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}

// One 16-byte store, whatever nvcc would make of a float4 assignment: it split many of them into four
// 4-byte stores (four times the L2 write requests: layer norm's apply kernel had no 16-byte store left,
// the scan's tile kernel five of eleven). The "memory" clobber keeps every other access in its place.
__device__ __forceinline__ void stitch_st4_v(float* p, float4 v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
#else
  *reinterpret_cast<float4*>(p) = v;
#endif
}

__device__ __forceinline__ void stitch_st4(float* p, const float v[4]) {
  stitch_st4_v(p, make_float4(v[0], v[1], v[2], v[3]));
}

// Four consecutive elements e..e+3 (e a multiple of 4) of a broadcast operand.
__device__ __forceinline__ void stitch_bload4(const float* p, int64_t e, int64_t inner, int64_t count, float v[4]) {
  if (count == 1) {
    const float s = p[0];
    v[0] = s; v[1] = s; v[2] = s; v[3] = s;
  } else if ((inner & 3) == 0) {  // the four elements share one operand value
    const float s = p[stitch_bidx(e, inner, count)];
    v[0] = s; v[1] = s; v[2] = s; v[3] = s;
  } else if (inner == 1 && (count & 3) == 0 && stitch_aligned16(p)) {
    stitch_ld4(p + (e % count), v);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = p[stitch_bidx(e + k, inner, count)];
  }
}

// A full-shape operand read through its own sizes and strides (a transposed, permuted or sliced view,
// codegen/emit/chain.py) instead of a contiguous copy made first. The host (_stitch_view in
// codegen/emit/runtime.py) merges the dims it can, and packs into `desc` the dim count (low 4 bits),
// whether 32-bit division suffices (bit 4) and whether four consecutive elements from a multiple of 4
// are one aligned float4 (bit 5); sizes z and strides s come outermost first.
#define STITCH_VIEW_DIMS 6
__host__ __device__ __forceinline__ int64_t stitch_view_offset(int64_t e, int64_t desc, int64_t z0, int64_t z1, int64_t z2, int64_t z3, int64_t z4, int64_t z5, int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t s4, int64_t s5) {
  const int nd = (int)(desc & 15);
  if (nd == 1) return e * s0;
  const int64_t z[STITCH_VIEW_DIMS] = {z0, z1, z2, z3, z4, z5};
  const int64_t s[STITCH_VIEW_DIMS] = {s0, s1, s2, s3, s4, s5};
  int64_t off = 0;
  if (desc & 16) {
    uint32_t r = (uint32_t)e;
#pragma unroll
    for (int d = STITCH_VIEW_DIMS - 1; d >= 1; --d) {
      if (d < nd) {
        const uint32_t q = r / (uint32_t)z[d];
        off += (int64_t)(r - q * (uint32_t)z[d]) * s[d];
        r = q;
      }
    }
    return off + (int64_t)r * s[0];
  }
#pragma unroll
  for (int d = STITCH_VIEW_DIMS - 1; d >= 1; --d) {
    if (d < nd) {
      const int64_t q = e / z[d];
      off += (e - q * z[d]) * s[d];
      e = q;
    }
  }
  return off + e * s[0];
}

// Elements e..e+3 (e a multiple of 4) of a view operand: one float4 where the host found the rows
// whole aligned float4s, else four offsets.
__device__ __forceinline__ void stitch_view_ld4(const float* p, int64_t e, int64_t desc, int64_t z0, int64_t z1, int64_t z2, int64_t z3, int64_t z4, int64_t z5, int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t s4, int64_t s5, float v[4]) {
  if (desc & 32) {
    stitch_ld4(p + stitch_view_offset(e, desc, z0, z1, z2, z3, z4, z5, s0, s1, s2, s3, s4, s5), v);
    return;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = p[stitch_view_offset(e + k, desc, z0, z1, z2, z3, z4, z5, s0, s1, s2, s3, s4, s5)];
}

// A kernel's input read as it is, with the interface of a generated StitchPro_* prologue functor
// (codegen/emit/functors.py), so that a kernel templated on its loads takes either.
struct StitchInput {
  const float* x;
  __device__ __forceinline__ float load(int64_t i) const { return __ldg(x + i); }
  __device__ __forceinline__ void load4(int64_t i, float v[4]) const { stitch_ld4(x + i, v); }
  bool vec_ok() const { return stitch_aligned16(x); }
};

// ---- minmax (this section compiles alone in the CPU emulation: tests/codegen/test_pool.py)
// NaN-propagating max/min, matching PyTorch. On sm_80 and later one instruction each (PTX's
// max.NaN / min.NaN: a NaN operand gives NaN), where the compare-and-select form takes two compares
// and a select per tap of a max pool or element of a max reduction.
template <bool MAX>
__device__ __forceinline__ float stitch_extreme(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  if (MAX) {
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  } else {
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  }
  return r;
#else
  return (a != a || (MAX ? a > b : a < b)) ? a : b;
#endif
}
__device__ __forceinline__ float stitch_max(float a, float b) { return stitch_extreme<true>(a, b); }
__device__ __forceinline__ float stitch_min(float a, float b) { return stitch_extreme<false>(a, b); }
// ---- end of minmax

// ---- carry (this section compiles alone in the CPU emulation: tests/codegen/test_conv_dw.py)
// Steps a (row, column) position over rows of `width` by (dr, dc) with dc < width: an add each and a
// carry, where recomputing it from a flat index would divide by the width every step.
template <class I>
__device__ __forceinline__ void stitch_advance(I& row, I& col, I dr, I dc, I width) {
  row += dr;
  col += dc;
  if (col >= width) {
    col -= width;
    ++row;
  }
}
// ---- end of carry
__device__ __forceinline__ float stitch_clamp(float a, float lo, float hi) { return a < lo ? lo : (a > hi ? hi : a); }

struct StitchSumOp {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct StitchMaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return stitch_max(a, b); }
};
struct StitchMinOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return stitch_min(a, b); }
};

template <class T, class Op>
__device__ __forceinline__ T stitch_warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(STITCH_FULL_MASK, v, offset));
  return v;
}

// A compile-time int as a value, for generic lambdas that instantiate per width (decltype(w)::value).
template <int N>
struct StitchInt {
  static constexpr int value = N;
};

// Work item `item` of a (row, part) grid over rows of `cols` elements cut into parts of `chunk`: its
// row, the row's first element and the part's elements [lo, hi) within the row.
struct StitchRowPart {
  int64_t row, base, lo, hi;
};

// ---- sweep (this section compiles alone in the CPU emulation: tests/codegen/test_sweep.py)
// The U visits' loads of the batch at c, issued before any is used, then their values stored to `saved`
// when given (visits at or past hi are skipped and leave their slots unset).
template <int U, int W, class Pro>
__device__ __forceinline__ void stitch_sweep_batch(const Pro& pro, float* saved, int64_t base, int64_t c, int64_t hi,
                                                   int64_t step, float (&t)[U][W]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t at = c + u * step;
    if (at < hi) {
      if constexpr (W == 4) {
        pro.load4(base + at, t[u]);
      } else {
        t[u][0] = pro.load(base + at);
      }
    }
  }
  if (saved == nullptr) return;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t at = c + u * step;
    if (at < hi) {
      if constexpr (W == 4) {
        stitch_st4(saved + base + at, t[u]);
      } else {
        saved[base + at] = t[u][0];
      }
    }
  }
}

// A thread's strided visits c = first, first + step, ... below hi of the row at `base`, W floats a visit
// (4: one 16-byte load, 1: one value), read through the prologue and stored to `saved` when given;
// on(t, c) for each visit in order. The loads of U visits are issued before the first is used: a loop
// that uses each load before it issues the next (the compiler does not move a load above the store to
// `saved` or above the use's branches) keeps one load per thread in flight, and a kernel with a warp or
// a block per row then waits on memory latency instead of streaming.
template <int U, int W, class Pro, class On>
__device__ __forceinline__ void stitch_sweep(const Pro& pro, float* saved, int64_t base, int64_t first, int64_t hi,
                                             int64_t step, On on) {
  for (int64_t c = first; c < hi; c += step * U) {
    float t[U][W];
    stitch_sweep_batch<U, W>(pro, saved, base, c, hi, step, t);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t at = c + u * step;
      if (at < hi) on(t[u], at);
    }
  }
}

// As stitch_sweep, but a batch whose U visits all lie below hi goes to whole(t, c) at once (t[u][k] is
// element c + u * step + k), so an online reduction can fold U * W values with independent updates; the
// visits of a last, partial batch go to one(t, at) each.
template <int U, int W, class Pro, class Whole, class One>
__device__ __forceinline__ void stitch_sweep_batches(const Pro& pro, float* saved, int64_t base, int64_t first,
                                                     int64_t hi, int64_t step, Whole whole, One one) {
  for (int64_t c = first; c < hi; c += step * U) {
    float t[U][W];
    stitch_sweep_batch<U, W>(pro, saved, base, c, hi, step, t);
    if (c + (U - 1) * step < hi) {
      whole(t, c);
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t at = c + u * step;
        if (at < hi) one(t[u], at);
      }
    }
  }
}

// Online (max m, sum s of exp(x - m)) over N values at once: one max over the values, at most one rescale
// of the sum, then N independent exponentials. The value-by-value update spends about 24 instructions a
// value (compares and branches for the special values, expf's range reduction), the fold about ten, and
// these row kernels are bound by issue, not bandwidth (H100: logsumexp 1.05 -> 0.72 ms, cross entropy
// 0.86 -> 0.78, long log-softmax 0.98 -> 0.91). Values holding a NaN or +inf, and a state already at NaN
// or +inf, go through `step` (that per-value update) one by one, which keeps its special cases.
template <int N, class Step>
__device__ __forceinline__ void stitch_online_group(float& m, float& s, const float* v, Step step) {
  float top = v[0];
  bool odd = !(v[0] < INFINITY);
#pragma unroll
  for (int k = 1; k < N; ++k) {
    top = fmaxf(top, v[k]);
    odd |= !(v[k] < INFINITY);
  }
  if (odd || !(m < INFINITY)) {
#pragma unroll
    for (int k = 0; k < N; ++k) step(m, s, v[k]);
    return;
  }
  if (top > m) {
    s *= expf(m - top);  // m = -inf: s is 0 and stays 0
    m = top;
  }
  if (m == -INFINITY) return;  // every value so far is -inf
  // exp(x) as 2^(x log2 e): a multiply and the hardware's exp2 where expf spends about eight instructions
  // on its range reduction; x <= 0 here, so the multiply's rounding moves the result by a few 1e-8 of it
  // (exp2 without its denormal scaling, by inline PTX, measured the same). Four partial sums keep the adds
  // independent: a sum array halved by a loop did not unroll, went to local memory and made the kernels
  // slower than the value-by-value update (evals/sass_audit.py now counts local memory).
  float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int k = 0; k < N; ++k) part[k % 4] += exp2f((v[k] - m) * 1.4426950408889634f);
  s += (part[0] + part[1]) + (part[2] + part[3]);
}

// ---- end of sweep

// The long-row kernels (lib softmax, lib groupnorm) keep a row's head, the values below `cached` (a multiple
// of 4), in shared memory and read its tail again, from L2. A float4 visit (j a multiple of 4) moves as one
// 16-byte access: a warp's 32 accesses then cover the banks once, where four scalar accesses at a four-float
// stride per thread conflicted four ways, on the store and on the load.
// Keeps the n values t of column j in the head, when j is below `cached`.
__device__ __forceinline__ void stitch_head_keep(float* head, int64_t j, int64_t cached, const float* t, int n) {
  if (j >= cached) return;
  if (n == 4) {
    *reinterpret_cast<float4*>(head + j) = make_float4(t[0], t[1], t[2], t[3]);
  } else {
    head[j] = t[0];
  }
}

// Values j.. of the row at `base` (four when vec, else one; returns how many): from the head below
// `cached`, else through the prologue from global memory.
template <class Pro>
__device__ __forceinline__ int stitch_head_or_tail(const Pro& pro, const float* head, int64_t base, int64_t j,
                                                   int64_t cached, bool vec, float t[4]) {
  if (j < cached) {
    if (vec) {
      const float4 q = *reinterpret_cast<const float4*>(head + j);
      t[0] = q.x;
      t[1] = q.y;
      t[2] = q.z;
      t[3] = q.w;
      return 4;
    }
    t[0] = head[j];
    return 1;
  }
  if (vec) {
    pro.load4(base + j, t);
    return 4;
  }
  t[0] = pro.load(base + j);
  return 1;
}

// Calls f(StitchInt<4>()) for 16-byte visits, else f(StitchInt<1>()): one generic body for both widths.
template <class F>
__device__ __forceinline__ void stitch_by_width(bool vec, F f) {
  if (vec) {
    f(StitchInt<4>());
  } else {
    f(StitchInt<1>());
  }
}

struct StitchKeepNothing {  // stitch_online_sweep's `keep` for kernels that cache nothing
  __device__ __forceinline__ void operator()(const float*, int64_t, int) const {}
};

// A thread's online (max m, sum s of exp(x - m)) over its visits of stitch_sweep (W floats a visit, U loads
// in flight): each complete batch folded at once (stitch_online_group), the visits of a last partial batch
// one at a time (a scalar visit through `update` itself, the caller's value-by-value update). keep(t, c, W)
// sees every visit's values first, for a kernel that also caches the row (lib softmax).
template <int U, int W, class Pro, class Update, class Keep>
__device__ __forceinline__ void stitch_online_sweep(const Pro& pro, float* saved, int64_t base, int64_t first,
                                                    int64_t hi, int64_t step, float& m, float& s, Update update,
                                                    Keep keep) {
  stitch_sweep_batches<U, W>(
      pro, saved, base, first, hi, step,
      [&](const float (&t)[U][W], int64_t c) {
#pragma unroll
        for (int u = 0; u < U; ++u) keep(t[u], c + u * step, W);
        stitch_online_group<U * W>(m, s, &t[0][0], update);
      },
      [&](const float* t, int64_t c) {
        keep(t, c, W);
        if constexpr (W == 1) {
          update(m, s, t[0]);
        } else {
          stitch_online_group<W>(m, s, t, update);
        }
      });
}

// The values of [lo, hi) of the row at `base` that this thread owns in a block-strided sweep, read through
// the prologue (and stored to `saved` when given): on4(t) for each 16-byte group when `vec`, else on1(v) for
// each value, UNROLL loads in flight. The statistics pass of lib layernorm sweeps its row parts with it.
template <int UNROLL, class Pro, class On4, class On1>
__device__ __forceinline__ void stitch_row_part_sweep(const Pro& pro, float* saved, int64_t base, int64_t lo,
                                                      int64_t hi, bool vec, On4 on4, On1 on1) {
  if (vec) {
    stitch_sweep<UNROLL, 4>(pro, saved, base, lo + 4 * (int64_t)threadIdx.x, hi, 4 * (int64_t)blockDim.x,
                            [&](const float* t, int64_t) { on4(t); });
  } else {
    stitch_sweep<UNROLL, 1>(pro, saved, base, lo + (int64_t)threadIdx.x, hi, (int64_t)blockDim.x,
                            [&](const float* t, int64_t) { on1(t[0]); });
  }
}

__device__ __forceinline__ StitchRowPart stitch_row_part(int64_t item, int64_t parts, int64_t chunk, int64_t cols) {
  StitchRowPart r;
  r.row = item / parts;
  r.base = r.row * cols;
  r.lo = (item % parts) * chunk;
  r.hi = r.lo + chunk < cols ? r.lo + chunk : cols;
  return r;
}

// Reduce over the whole block (blockDim.x a multiple of 32); every thread gets the result.
// `shared` holds 32 values; consecutive calls may reuse it.
template <class T, class Op>
__device__ __forceinline__ T stitch_block_reduce(T v, Op op, T identity, T* shared) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = stitch_warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? shared[lane] : identity;
    w = stitch_warp_reduce(w, op);
    if (lane == 0) shared[0] = w;
  }
  __syncthreads();
  return shared[0];
}

// The default memory pool keeps freed memory between calls, so a kernel's stream-ordered workspace
// (cudaMallocAsync / cudaFreeAsync, capturable in a CUDA graph) costs no real allocation after the first.
static inline void stitch_keep_async_pool(cudaStream_t stream) {
  static bool done[64] = {false};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    (void)cudaGetLastError();
    return;
  }
  if (done[dev]) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
    (void)cudaGetLastError();
    return;  // changing the pool inside a capture would invalidate it: the next plain call does it
  }
  done[dev] = true;
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess) {
    unsigned long long threshold = ~0ull;
    (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  }
  (void)cudaGetLastError();
}

// body(ws) with a stream-ordered workspace of `count` T slots, freed after it either way; returns the
// first error.
template <class T, class Body>
static int stitch_with_workspace(int64_t count, cudaStream_t stream, Body body) {
  stitch_keep_async_pool(stream);
  T* ws = nullptr;
  const cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&ws), sizeof(T) * count, stream);
  if (err != cudaSuccess) return (int)err;
  const int failed = body(ws);
  const cudaError_t freed = cudaFreeAsync(ws, stream);
  return failed != 0 ? failed : (int)freed;
}

// Two kernels over (row, part) blocks of `rows` rows of `cols` elements, parts planned by
// stitch_plan_parts (one part per row when the rows fill the GPU), with a stream-ordered workspace
// of `per_part` T slots per part: `first(grid, ws, parts, chunk)` writes each part's partial state,
// `second(grid, ws, parts, chunk)` reads its row's states and writes the outputs (row kernels of
// lib softmax and lib layernorm). Returns the first error; the workspace is freed either way.
template <class T, class First, class Second>
static int stitch_two_pass_rows(int64_t rows, int64_t cols, bool align4, int per_part, First first, Second second,
                                cudaStream_t stream) {
  int64_t parts = 1;
  int64_t chunk = cols;
  if (!stitch_plan_parts(rows, cols, 8192, align4, &parts, &chunk)) {
    parts = 1;
    chunk = cols;
  }
  return stitch_with_workspace<T>(per_part * rows * parts, stream, [&](T* ws) {
    const unsigned grid = stitch_grid_all(rows * parts, 1);
    first(grid, ws, parts, chunk);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) {
      second(grid, ws, parts, chunk);
      err = cudaGetLastError();
    }
    return (int)err;
  });
}

// Epilogue that leaves values unchanged.
struct StitchNoEpi {
  __device__ __forceinline__ float apply(float v, int64_t) const { return v; }
};
