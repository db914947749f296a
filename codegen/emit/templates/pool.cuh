// lib pool: max / average / adaptive pooling over the last 1-3 dims of a contiguous [planes, D, H, W]
// tensor (1-D and 2-D pools use D = 1, H = 1). One thread per output element, grid-stride; the
// window loops read each input row segment with consecutive threads on consecutive outputs, so the
// loads of a warp fall in a few cache lines; fixed windows are compile-time constants where the
// generated launcher bakes them in, and large adaptive windows take a warp per output. Pro::load(i) reads input element i (StitchInput: the
// tensor itself; a StitchPro_* functor: through the group's elementwise prologue, e.g. a conv's bias
// and epilogue, recomputed where windows overlap, so that chain's result is never written);
// Epi::apply(v, e) fuses the group's elementwise epilogue into the store.
// MODE: 0 max, 1 average, 2 adaptive average, 3 adaptive max.


struct StitchPoolShape {
  int64_t planes;
  int64_t id, ih, iw, od, oh, ow;
  int kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw;
  int count_include_pad;
  int divisor;  // avg pool's divisor_override, 0 for none
};

// [start, end) of adaptive window o of `out` over an input of `in` (PyTorch's floor / ceil split).
__device__ __forceinline__ void stitch_adaptive_window(int64_t o, int64_t in, int64_t out, int64_t& start,
                                                       int64_t& end) {
  start = (o * in) / out;
  end = ((o + 1) * in + out - 1) / out;
}

// Division of 32-bit indices below 2^31 by a divisor fixed for the launch, as a multiply-high, an add and
// a shift (Granlund and Montgomery's method, the form with a 33-bit magic split into m + 2^32): a thread
// per output otherwise spends many of its instructions on the three divisions and remainders that locate
// its output, and a pool with overlapping windows is issue-bound before it is memory-bound (MaxPool2d 3x3/2:
// 1.22 -> 1.02-1.07 ms on an H100 with the dividers; docs/operators.md, "Pooling").
struct StitchDivider {
  unsigned d, m, shift;
};

static inline StitchDivider stitch_divider(unsigned d) {
  unsigned shift = 0;
  while (shift < 32 && (1ull << shift) < d) ++shift;
  const unsigned m = (unsigned)(((1ull << 32) * ((1ull << shift) - d)) / d + 1);
  return StitchDivider{d, m, shift};
}

__device__ __forceinline__ unsigned stitch_mulhi32(unsigned a, unsigned b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return (unsigned)(((unsigned long long)a * b) >> 32);
#endif
}

// n / d and n % d for 0 <= n < 2^31.
__device__ __forceinline__ int stitch_divmod(int n, const StitchDivider& v, int& rem) {
  const unsigned q = (stitch_mulhi32((unsigned)n, v.m) + (unsigned)n) >> v.shift;
  rem = n - (int)(q * v.d);
  return (int)q;
}

// The dividers of an output index: by ow, oh and od.
struct StitchPoolIndex {
  StitchDivider ow, oh, od;
};

static inline StitchPoolIndex stitch_pool_index(const StitchPoolShape& s) {
  return StitchPoolIndex{stitch_divider((unsigned)s.ow), stitch_divider((unsigned)s.oh), stitch_divider((unsigned)s.od)};
}

// Output element e's coordinates (od, oh, ow) and the offset of its plane's first input element. 32-bit
// indices divide through the launch's dividers (valid below 2^31: the launcher takes this path only then).
template <class I>
__device__ __forceinline__ void stitch_pool_output(I e, const StitchPoolShape& s, const StitchPoolIndex& ix, I& od,
                                                   I& oh, I& ow, I& xp) {
  if constexpr (sizeof(I) == 4) {
    int t = stitch_divmod((int)e, ix.ow, ow);
    t = stitch_divmod(t, ix.oh, oh);
    t = stitch_divmod(t, ix.od, od);
    xp = (I)t * (I)s.id * (I)s.ih * (I)s.iw;
  } else {
    ow = e % (I)s.ow;
    I t = e / (I)s.ow;
    oh = t % (I)s.oh;
    t /= (I)s.oh;
    od = t % (I)s.od;
    xp = (t / (I)s.od) * (I)s.id * (I)s.ih * (I)s.iw;
  }
}

// The window extent along one dim: the compile-time K when the launcher baked one in (K > 0), else the
// shape's. Compile-time windows let the loops below unroll, so a thread issues all its window's loads at
// once instead of one per loop trip (the kernel is bound by load latency otherwise).
template <int K>
__device__ __forceinline__ int stitch_pool_extent(int runtime) {
  return K > 0 ? K : runtime;
}

// A window's fold: the sum (average pooling) or the NaN-propagating max, and its starting value.
template <bool SUM>
__device__ __forceinline__ float stitch_pool_fold(float acc, float a) {
  return SUM ? acc + a : stitch_max(acc, a);
}
template <bool SUM>
__device__ __forceinline__ float stitch_pool_identity() {
  return SUM ? 0.f : -INFINITY;
}

// A window tap's load, issued whether or not the tap lies inside the input (`ok`; one outside reads
// element `spare`, the plane's first, and the caller drops the value): a load under its own branch made
// ptxas reload the input pointer from the constant bank (an LDC on the ADU pipe, which Nsight Compute
// showed half busy on the max pools) and redo the address for every tap.
template <class Pro, class I>
__device__ __forceinline__ float stitch_pool_tap(const Pro& pro, bool ok, I at, I spare) {
  return pro.load(ok ? at : spare);
}

// An average pool's window starting at (ds, hs, ws) with extents (kd, kh, kw), clipped as PyTorch clips it:
// to the padded input for count_include_pad (`padded` taps), to the input itself for the sum ([d0, d1) x
// [h0, h1) x [w0, w1)) and for the other divisor.
template <class I>
struct StitchPoolClip {
  I d0, d1, h0, h1, w0, w1, padded;
  __device__ __forceinline__ I divisor(const StitchPoolShape& s) const {
    return s.divisor > 0 ? (I)s.divisor : (s.count_include_pad ? padded : (d1 - d0) * (h1 - h0) * (w1 - w0));
  }
};

template <class I>
__device__ __forceinline__ StitchPoolClip<I> stitch_pool_clip(I ds, I hs, I ws, int kd, int kh, int kw,
                                                              const StitchPoolShape& s) {
  const I d1p = min(ds + (I)kd, (I)s.id + (I)s.pd), h1p = min(hs + (I)kh, (I)s.ih + (I)s.ph),
          w1p = min(ws + (I)kw, (I)s.iw + (I)s.pw);
  StitchPoolClip<I> c;
  c.padded = (d1p - ds) * (h1p - hs) * (w1p - ws);
  c.d0 = max(ds, (I)0);
  c.h0 = max(hs, (I)0);
  c.w0 = max(ws, (I)0);
  c.d1 = min(d1p, (I)s.id);
  c.h1 = min(h1p, (I)s.ih);
  c.w1 = min(w1p, (I)s.iw);
  return c;
}

template <int MODE, int KD, int KH, int KW, class I, class Pro, class Epi>
__global__ void stitch_pool_kernel(Pro pro, float* __restrict__ y, StitchPoolShape s, StitchPoolIndex ix, Epi epi) {
  // I: the index type, int when every input and output index fits (the launcher checks), which
  // makes the per-element divisions and window arithmetic 32-bit; int64_t otherwise.
  const I od_n = (I)s.od, oh_n = (I)s.oh, ow_n = (I)s.ow, id_n = (I)s.id, ih_n = (I)s.ih, iw_n = (I)s.iw;
  const I total = (I)s.planes * od_n * oh_n * ow_n;
  const I step = (I)gridDim.x * (I)blockDim.x;
  const int kd = stitch_pool_extent<KD>(s.kd), kh = stitch_pool_extent<KH>(s.kh), kw = stitch_pool_extent<KW>(s.kw);
  for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < total; e += step) {
    I od, oh, ow, xp;  // xp: the plane's first input element
    stitch_pool_output(e, s, ix, od, oh, ow, xp);
    float v;
    if (MODE == 2 || MODE == 3) {
      int64_t d0, d1, h0, h1, w0, w1;
      stitch_adaptive_window(od, s.id, s.od, d0, d1);
      stitch_adaptive_window(oh, s.ih, s.oh, h0, h1);
      stitch_adaptive_window(ow, s.iw, s.ow, w0, w1);
      float acc = stitch_pool_identity<MODE == 2>();
      for (I d = (I)d0; d < (I)d1; ++d)
        for (I h = (I)h0; h < (I)h1; ++h) {
          const I row = xp + (d * ih_n + h) * iw_n;
          for (I w = (I)w0; w < (I)w1; ++w) acc = stitch_pool_fold<MODE == 2>(acc, pro.load(row + w));
        }
      v = MODE == 2 ? acc / (float)((d1 - d0) * (h1 - h0) * (w1 - w0)) : acc;
    } else if (MODE == 0) {
      float acc = -INFINITY;
#pragma unroll
      for (int a = 0; a < kd; ++a) {
        const I d = od * (I)s.sd - (I)s.pd + (I)a * (I)s.dd;
        const bool d_in = d >= 0 && d < id_n;
#pragma unroll
        for (int b = 0; b < kh; ++b) {
          const I h = oh * (I)s.sh - (I)s.ph + (I)b * (I)s.dh;
          const bool h_in = d_in && h >= 0 && h < ih_n;
          const I row = xp + (d * ih_n + h) * iw_n;
#pragma unroll
          for (int c = 0; c < kw; ++c) {
            const I w = ow * (I)s.sw - (I)s.pw + (I)c * (I)s.dw;
            const bool ok = h_in && w >= 0 && w < iw_n;
            const float v = stitch_pool_tap(pro, ok, row + w, xp);
            acc = ok ? stitch_max(acc, v) : acc;  // NaN propagates, as in PyTorch
          }
        }
      }
      v = acc;
    } else {
      const I ds = od * (I)s.sd - (I)s.pd, hs = oh * (I)s.sh - (I)s.ph, ws = ow * (I)s.sw - (I)s.pw;
      const StitchPoolClip<I> clip = stitch_pool_clip(ds, hs, ws, kd, kh, kw, s);
      const I d0 = clip.d0, d1 = clip.d1, h0 = clip.h0, h1 = clip.h1, w0 = clip.w0, w1 = clip.w1;
      float acc = 0.f;
      // The unrolled window, each tap taken when it lies inside [d0, d1) x [h0, h1) x [w0, w1): the same
      // terms in the same order as the loops over the clipped window.
#pragma unroll
      for (int a = 0; a < kd; ++a) {
        const I d = ds + (I)a;
        const bool d_in = d >= d0 && d < d1;
#pragma unroll
        for (int b = 0; b < kh; ++b) {
          const I h = hs + (I)b;
          const bool h_in = d_in && h >= h0 && h < h1;
          const I row = xp + (d * ih_n + h) * iw_n;
#pragma unroll
          for (int c = 0; c < kw; ++c) {
            const I w = ws + (I)c;
            const bool ok = h_in && w >= w0 && w < w1;
            const float v = stitch_pool_tap(pro, ok, row + w, xp);
            if (ok) acc += v;
          }
        }
      }
      v = acc / (float)clip.divisor(s);
    }
    y[e] = epi.apply(v, e);
  }
}

// A fixed window (max or average) with V outputs a thread along the width (the launch knob `outs`):
// group g of a row's outputs ow0 = V * g .. ow0 + V - 1 reads, for each window row, the SPAN input
// columns those outputs' windows cover once into registers (3x3 stride 2, V = 4: 9 loads a row where
// four threads take 12), and locates its outputs with one set of divisions. SW and DW (the width's
// stride and dilation) are the launcher's compile-time constants. A column outside the input reads as
// the fold's identity (-inf for max, 0 for the sum), which leaves every output's value as the thread
// kernel computes it; the average's divisor is the thread kernel's, per output.
template <int MODE, int KD, int KH, int KW, int SW, int DW, int V, class I, class Pro, class Epi>
__global__ void stitch_pool_rowvec_kernel(Pro pro, float* __restrict__ y, StitchPoolShape s, StitchPoolShape g,
                                          StitchPoolIndex ix, Epi epi) {
  constexpr int SPAN = (V - 1) * SW + (KW - 1) * DW + 1;
  const I od_n = (I)s.od, oh_n = (I)s.oh, ow_n = (I)s.ow, id_n = (I)s.id, ih_n = (I)s.ih, iw_n = (I)s.iw;
  const I total = (I)g.planes * od_n * oh_n * (I)g.ow;  // g: the shape with the width counted in groups
  const I step = (I)gridDim.x * (I)blockDim.x;
  for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < total; e += step) {
    I od, oh, og, xp;
    stitch_pool_output(e, g, ix, od, oh, og, xp);
    I row_out;  // the output row's first element
    if constexpr (sizeof(I) == 4) {
      int rem;
      row_out = (I)stitch_divmod((int)e, ix.ow, rem) * ow_n;
    } else {
      row_out = e / (I)g.ow * ow_n;
    }
    const I ow0 = og * (I)V;
    const I ws0 = ow0 * (I)SW - (I)s.pw;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = stitch_pool_identity<MODE == 1>();
    const I ds = od * (I)s.sd - (I)s.pd, hs = oh * (I)s.sh - (I)s.ph;
#pragma unroll
    for (int a = 0; a < KD; ++a) {
      const I d = ds + (I)a * (I)s.dd;
#pragma unroll
      for (int b = 0; b < KH; ++b) {
        const I h = hs + (I)b * (I)s.dh;
        if (d < 0 || d >= id_n || h < 0 || h >= ih_n) continue;
        const I row = xp + (d * ih_n + h) * iw_n;
        float t[SPAN];
#pragma unroll
        for (int u = 0; u < SPAN; ++u) {
          const I w = ws0 + (I)u;
          const bool ok = w >= 0 && w < iw_n;
          const float v = stitch_pool_tap(pro, ok, row + w, xp);
          t[u] = ok ? v : stitch_pool_identity<MODE == 1>();
        }
#pragma unroll
        for (int v = 0; v < V; ++v) {
#pragma unroll
          for (int c = 0; c < KW; ++c) acc[v] = stitch_pool_fold<MODE == 1>(acc[v], t[v * SW + c * DW]);
        }
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const I ow = ow0 + (I)v;
      if (ow < ow_n) {
        if (MODE == 1) acc[v] /= (float)stitch_pool_clip(ds, hs, ow * (I)s.sw - (I)s.pw, KD, KH, KW, s).divisor(s);
        acc[v] = epi.apply(acc[v], row_out + ow);
      }
    }
    // The V outputs in one 8- or 16-byte store where they are whole and aligned (V scalar stores a lane
    // apart write each sector in V pieces), else one by one.
    float* out = y + row_out + ow0;
    if constexpr (V == 2 || V == 4) {
      if (ow0 + (I)V <= ow_n && reinterpret_cast<uintptr_t>(out) % (V * sizeof(float)) == 0) {
        if constexpr (V == 2) {
          *reinterpret_cast<float2*>(out) = make_float2(acc[0], acc[1]);
        } else {
          stitch_st4_v(out, make_float4(acc[0], acc[1], acc[2], acc[3]));
        }
        continue;
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      if (ow0 + (I)v < ow_n) out[v] = acc[v];
    }
  }
}

#ifndef STITCH_HOST_EMULATION  // tests/codegen/test_pool.py runs the thread kernel's window math on the CPU
// Adaptive pooling with large windows (a 224x224 plane to 7x7: 1024 inputs an output): one warp per
// output, the lanes over the flattened window, so a warp reads whole row segments (coalesced) where
// one thread per output would read one element from each of 32 rows 32 floats apart. The lanes'
// partial sums (maxima) combine in a warp tree.
// A lane's fold of its taps of one output's window, W floats a tap (4: the window's rows and first
// column are whole float4s, one 16-byte load a tap). Tap k of the flattened window is row q = k / wn of
// the window's dn * hn rows, column W * (k % wn) (wn, count: the window's width and size in taps). A lane
// takes taps lane, lane + 32, ...: its (q, c) advance by 32 taps with an add and a carry, so the divisions
// happen once an output, not once a tap (3-D windows still divide q by hn for the depth). Four taps'
// loads are in flight per lane, then folded in tap order; a tap past the window loads the batch's first
// tap instead (never used), so the loads need no branch between them.
template <int MODE, int W, class I, class Pro, class Address>
__device__ __forceinline__ float stitch_pool_warp_taps(const Pro& pro, I count, I wn, Address address) {
  const int lane = threadIdx.x & 31;
  const I qstep = 32 / wn, cstep = 32 - qstep * wn;
  I q = (I)lane / wn, c = (I)lane - q * wn;
  float acc = stitch_pool_identity<MODE == 2>();
  for (I k0 = (I)lane; k0 < count; k0 += 4 * 32) {
    const I first = address(q, W * c);
    float a[4][W];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const I at = k0 + (I)(32 * u) < count ? address(q, W * c) : first;
      if constexpr (W == 4) {
        pro.load4(at, a[u]);
      } else {
        a[u][0] = pro.load(at);
      }
      stitch_advance(q, c, qstep, cstep, wn);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      if (k0 + (I)(32 * u) < count) {
#pragma unroll
        for (int k = 0; k < W; ++k) acc = stitch_pool_fold<MODE == 2>(acc, a[u][k]);
      }
    }
  }
  return acc;
}

// vec: the input rows are whole float4s and the loads may be 16 bytes (the launcher's check); then an
// output whose window starts and ends on a float4 boundary takes 16-byte taps (a quarter of the load
// instructions, four times the bytes in flight).
template <int MODE, class I, class Pro, class Epi>
__global__ void stitch_pool_adaptive_warp_kernel(Pro pro, float* __restrict__ y, StitchPoolShape s, StitchPoolIndex ix,
                                                 Epi epi, int vec) {
  const I od_n = (I)s.od, oh_n = (I)s.oh, ow_n = (I)s.ow, ih_n = (I)s.ih, iw_n = (I)s.iw;
  const I total = (I)s.planes * od_n * oh_n * ow_n;
  const int lane = threadIdx.x & 31;
  const I warps = (I)gridDim.x * (I)(blockDim.x / 32);
  for (I e = (I)blockIdx.x * (I)(blockDim.x / 32) + (I)(threadIdx.x / 32); e < total; e += warps) {
    I od, oh, ow, xp;
    stitch_pool_output(e, s, ix, od, oh, ow, xp);
    int64_t d0, d1, h0, h1, w0, w1;
    stitch_adaptive_window(od, s.id, s.od, d0, d1);
    stitch_adaptive_window(oh, s.ih, s.oh, h0, h1);
    stitch_adaptive_window(ow, s.iw, s.ow, w0, w1);
    const I wn = (I)(w1 - w0), hn = (I)(h1 - h0), dn = (I)(d1 - d0);
    const I count = wn * hn * dn;
    const auto address = [&](I row, I col) {
      const I d = dn == 1 ? (I)0 : row / hn;
      return xp + (((I)d0 + d) * ih_n + (I)h0 + row - d * hn) * iw_n + (I)w0 + col;
    };
    float acc;
    if (vec && wn % 4 == 0 && w0 % 4 == 0) {  // the same for the whole warp: one output a warp
      acc = stitch_pool_warp_taps<MODE, 4, I>(pro, count / 4, wn / 4, address);
    } else {
      acc = stitch_pool_warp_taps<MODE, 1, I>(pro, count, wn, address);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc = stitch_pool_fold<MODE == 2>(acc, __shfl_xor_sync(0xffffffffu, acc, off));
    if (lane == 0) y[e] = epi.apply(MODE == 2 ? acc / (float)count : acc, e);
  }
}

// Windows of at least this many inputs (adaptive pooling) take the warp-per-output kernel.
#define STITCH_POOL_WARP_WINDOW 64

static int64_t stitch_pool_adaptive_extent(int64_t in, int64_t out) {  // the largest adaptive window along a dim
  return out > 0 ? (in + out - 1) / out + (in % out != 0 ? 1 : 0) : 1;
}

// A fixed window's row kernel with V (2 or 4) outputs a thread, where the launcher baked the window and the
// width's stride and dilation (SW, DW > 0). Returns -1 when it does not apply.
template <int MODE, int KD, int KH, int KW, int SW, int DW, int V, class Pro, class Epi>
static int stitch_pool_rowvec_run(const Pro& pro, float* y, const StitchPoolShape& s, Epi epi, StitchLaunch c,
                                  cudaStream_t stream) {
  if constexpr (MODE > 1 || KD <= 0 || KH <= 0 || KW <= 0 || SW <= 0 || DW <= 0) {
    return -1;
  } else {
    StitchPoolShape g = s;
    g.ow = (s.ow + V - 1) / V;
    const int64_t groups = g.planes * g.od * g.oh * g.ow;
    const unsigned grid = stitch_grid(groups, c.threads, c.per_sm);
    const int64_t reach = groups + (int64_t)grid * c.threads;
    const int64_t inputs = s.planes * s.id * s.ih * s.iw, outputs = s.planes * s.od * s.oh * s.ow;
    const StitchPoolIndex ix = stitch_pool_index(g);
    if (inputs < (1LL << 31) && outputs < (1LL << 31) && reach < (1LL << 31)) {
      stitch_pool_rowvec_kernel<MODE, KD, KH, KW, SW, DW, V, int, Pro, Epi><<<grid, c.threads, 0, stream>>>(
          pro, y, s, g, ix, epi);
    } else {
      stitch_pool_rowvec_kernel<MODE, KD, KH, KW, SW, DW, V, int64_t, Pro, Epi><<<grid, c.threads, 0, stream>>>(
          pro, y, s, g, ix, epi);
    }
    return (int)cudaGetLastError();
  }
}

// One thread per output (one warp for large adaptive windows); by default one block per `threads`
// outputs (no grid-stride cap: on an H100 a capped grid-stride loop streamed 7% slower), the launch
// table's per_sm caps it when set. KD, KH, KW: the window baked in by the generated launcher (0: read
// it from the shape, e.g. adaptive pooling or a window too large to unroll); SW, DW: the width's stride
// and dilation when baked too (0: not). outs (the launch knob): 2 or 4 takes stitch_pool_rowvec_kernel
// with that many outputs a thread where it applies (2: the 3x3 stride-2 window's five columns a row for
// two outputs, 16 bytes between neighbouring threads' loads, the layout torch.compile's pooling kernels use).
template <int MODE, int KD, int KH, int KW, int SW, int DW, class Pro, class Epi>
int stitch_pool_run(const Pro& pro, float* y, StitchPoolShape s, Epi epi, StitchLaunch cfg, int outs,
                    cudaStream_t stream) {
  const int64_t total = s.planes * s.od * s.oh * s.ow;
  if (total <= 0) return (int)cudaGetLastError();
  const StitchLaunch c = stitch_launch_or(cfg, 256, 0);  // the launch table's knobs, else 256, uncapped
  if (outs == 4 || outs == 2) {
    const int done = outs == 4 ? stitch_pool_rowvec_run<MODE, KD, KH, KW, SW, DW, 4, Pro, Epi>(pro, y, s, epi, c, stream)
                               : stitch_pool_rowvec_run<MODE, KD, KH, KW, SW, DW, 2, Pro, Epi>(pro, y, s, epi, c, stream);
    if (done >= 0) return done;
  }
  const int64_t inputs = s.planes * s.id * s.ih * s.iw;
  const bool adaptive = MODE == 2 || MODE == 3;
  const bool warp = adaptive && stitch_pool_adaptive_extent(s.id, s.od) * stitch_pool_adaptive_extent(s.ih, s.oh) *
                                       stitch_pool_adaptive_extent(s.iw, s.ow) >=
                                   STITCH_POOL_WARP_WINDOW;
  const int64_t work = warp ? total * 32 : total;  // threads wanted
  const unsigned grid = stitch_grid(work, c.threads, c.per_sm);
  // 32-bit indices when every index (and a grid-stride step past the end) stays below 2^31.
  const int64_t reach = work + (int64_t)grid * c.threads;
  const bool narrow = inputs < (1LL << 31) && reach < (1LL << 31);
  const StitchPoolIndex ix = stitch_pool_index(s);  // used by the 32-bit (narrow) kernels
  if constexpr (MODE == 2 || MODE == 3) {  // fixed windows never instantiate the warp kernel
    if (warp) {
      const int vec = s.iw % 4 == 0 && pro.vec_ok();
      if (narrow) {
        stitch_pool_adaptive_warp_kernel<MODE, int, Pro, Epi><<<grid, c.threads, 0, stream>>>(pro, y, s, ix, epi, vec);
      } else {
        stitch_pool_adaptive_warp_kernel<MODE, int64_t, Pro, Epi><<<grid, c.threads, 0, stream>>>(pro, y, s, ix, epi,
                                                                                                   vec);
      }
      return (int)cudaGetLastError();
    }
  }
  if (narrow) {
    stitch_pool_kernel<MODE, KD, KH, KW, int, Pro, Epi><<<grid, c.threads, 0, stream>>>(pro, y, s, ix, epi);
  } else {
    stitch_pool_kernel<MODE, KD, KH, KW, int64_t, Pro, Epi><<<grid, c.threads, 0, stream>>>(pro, y, s, ix, epi);
  }
  return (int)cudaGetLastError();
}
#endif  // STITCH_HOST_EMULATION
