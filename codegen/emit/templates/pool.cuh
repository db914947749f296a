// lib pool: max / average / adaptive pooling over the last 1-3 dims of a contiguous [planes, D, H, W]
// tensor (1-D and 2-D pools use D = 1, H = 1). One thread per output element, grid-stride; the
// window loops read each input row segment with consecutive threads on consecutive outputs, so the
// loads of a warp fall in a few cache lines. Pro::load(i) reads input element i (StitchInput: the
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

template <int MODE, class I, class Pro, class Epi>
__global__ void stitch_pool_kernel(Pro pro, float* __restrict__ y, StitchPoolShape s, Epi epi) {
  // I: the index type, int when every input and output index fits (the launcher checks), which
  // makes the per-element divisions and window arithmetic 32-bit; int64_t otherwise.
  const I od_n = (I)s.od, oh_n = (I)s.oh, ow_n = (I)s.ow, id_n = (I)s.id, ih_n = (I)s.ih, iw_n = (I)s.iw;
  const I total = (I)s.planes * od_n * oh_n * ow_n;
  const I step = (I)gridDim.x * (I)blockDim.x;
  for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < total; e += step) {
    const I ow = e % ow_n;
    I t = e / ow_n;
    const I oh = t % oh_n;
    t /= oh_n;
    const I od = t % od_n;
    const I plane = t / od_n;
    const I xp = plane * id_n * ih_n * iw_n;  // the plane's first input element
    float v;
    if (MODE == 2 || MODE == 3) {
      int64_t d0, d1, h0, h1, w0, w1;
      stitch_adaptive_window(od, s.id, s.od, d0, d1);
      stitch_adaptive_window(oh, s.ih, s.oh, h0, h1);
      stitch_adaptive_window(ow, s.iw, s.ow, w0, w1);
      float acc = MODE == 2 ? 0.f : -INFINITY;
      for (I d = (I)d0; d < (I)d1; ++d)
        for (I h = (I)h0; h < (I)h1; ++h) {
          const I row = xp + (d * ih_n + h) * iw_n;
          for (I w = (I)w0; w < (I)w1; ++w) {
            const float a = pro.load(row + w);
            acc = MODE == 2 ? acc + a : ((a > acc || a != a) ? a : acc);
          }
        }
      v = MODE == 2 ? acc / (float)((d1 - d0) * (h1 - h0) * (w1 - w0)) : acc;
    } else if (MODE == 0) {
      float acc = -INFINITY;
      for (int a = 0; a < s.kd; ++a) {
        const I d = od * (I)s.sd - (I)s.pd + (I)a * (I)s.dd;
        if (d < 0 || d >= id_n) continue;
        for (int b = 0; b < s.kh; ++b) {
          const I h = oh * (I)s.sh - (I)s.ph + (I)b * (I)s.dh;
          if (h < 0 || h >= ih_n) continue;
          const I row = xp + (d * ih_n + h) * iw_n;
          for (int c = 0; c < s.kw; ++c) {
            const I w = ow * (I)s.sw - (I)s.pw + (I)c * (I)s.dw;
            if (w < 0 || w >= iw_n) continue;
            const float q = pro.load(row + w);
            if (q > acc || q != q) acc = q;  // NaN propagates, as in PyTorch
          }
        }
      }
      v = acc;
    } else {
      // PyTorch's average: the window is clipped to the padded input for count_include_pad, to the
      // input itself for the sum and for the other divisor.
      I d0 = od * (I)s.sd - (I)s.pd, h0 = oh * (I)s.sh - (I)s.ph, w0 = ow * (I)s.sw - (I)s.pw;
      I d1 = min(d0 + (I)s.kd, id_n + (I)s.pd), h1 = min(h0 + (I)s.kh, ih_n + (I)s.ph),
        w1 = min(w0 + (I)s.kw, iw_n + (I)s.pw);
      const I padded = (d1 - d0) * (h1 - h0) * (w1 - w0);
      d0 = max(d0, (I)0);
      h0 = max(h0, (I)0);
      w0 = max(w0, (I)0);
      d1 = min(d1, id_n);
      h1 = min(h1, ih_n);
      w1 = min(w1, iw_n);
      float acc = 0.f;
      for (I d = d0; d < d1; ++d)
        for (I h = h0; h < h1; ++h) {
          const I row = xp + (d * ih_n + h) * iw_n;
          for (I w = w0; w < w1; ++w) acc += pro.load(row + w);
        }
      const I count = s.divisor > 0 ? (I)s.divisor : (s.count_include_pad ? padded : (d1 - d0) * (h1 - h0) * (w1 - w0));
      v = acc / (float)count;
    }
    y[e] = epi.apply(v, e);
  }
}

// One thread per output; by default one block per `threads` outputs (no grid-stride cap: on an H100
// a capped grid-stride loop streamed 7% slower), the launch table's per_sm caps it when set.
template <int MODE, class Pro, class Epi>
int stitch_pool_run(const Pro& pro, float* y, StitchPoolShape s, Epi epi, StitchLaunch cfg, cudaStream_t stream) {
  const int64_t total = s.planes * s.od * s.oh * s.ow;
  if (total <= 0) return (int)cudaGetLastError();
  const StitchLaunch c = stitch_launch_or(cfg, 256, 0);  // the launch table's knobs, else 256, uncapped
  const unsigned grid = stitch_grid(total, c.threads, c.per_sm);
  // 32-bit indices when every index (and a grid-stride step past the end) stays below 2^31.
  const int64_t inputs = s.planes * s.id * s.ih * s.iw;
  const int64_t reach = total + (int64_t)grid * c.threads;
  if (inputs < (1LL << 31) && reach < (1LL << 31)) {
    stitch_pool_kernel<MODE, int, Pro, Epi><<<grid, c.threads, 0, stream>>>(pro, y, s, epi);
  } else {
    stitch_pool_kernel<MODE, int64_t, Pro, Epi><<<grid, c.threads, 0, stream>>>(pro, y, s, epi);
  }
  return (int)cudaGetLastError();
}
