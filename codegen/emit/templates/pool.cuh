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

template <int MODE, class Pro, class Epi>
__global__ void stitch_pool_kernel(Pro pro, float* __restrict__ y, StitchPoolShape s, Epi epi) {
  const int64_t total = s.planes * s.od * s.oh * s.ow;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t ow = e % s.ow;
    int64_t t = e / s.ow;
    const int64_t oh = t % s.oh;
    t /= s.oh;
    const int64_t od = t % s.od;
    const int64_t plane = t / s.od;
    const int64_t xp = plane * s.id * s.ih * s.iw;  // the plane's first input element
    float v;
    if (MODE == 2 || MODE == 3) {
      int64_t d0, d1, h0, h1, w0, w1;
      stitch_adaptive_window(od, s.id, s.od, d0, d1);
      stitch_adaptive_window(oh, s.ih, s.oh, h0, h1);
      stitch_adaptive_window(ow, s.iw, s.ow, w0, w1);
      float acc = MODE == 2 ? 0.f : -INFINITY;
      for (int64_t d = d0; d < d1; ++d)
        for (int64_t h = h0; h < h1; ++h) {
          const int64_t row = xp + (d * s.ih + h) * s.iw;
          for (int64_t w = w0; w < w1; ++w) {
            const float a = pro.load(row + w);
            acc = MODE == 2 ? acc + a : ((a > acc || a != a) ? a : acc);
          }
        }
      v = MODE == 2 ? acc / (float)((d1 - d0) * (h1 - h0) * (w1 - w0)) : acc;
    } else if (MODE == 0) {
      float acc = -INFINITY;
      for (int a = 0; a < s.kd; ++a) {
        const int64_t d = od * s.sd - s.pd + (int64_t)a * s.dd;
        if (d < 0 || d >= s.id) continue;
        for (int b = 0; b < s.kh; ++b) {
          const int64_t h = oh * s.sh - s.ph + (int64_t)b * s.dh;
          if (h < 0 || h >= s.ih) continue;
          const int64_t row = xp + (d * s.ih + h) * s.iw;
          for (int c = 0; c < s.kw; ++c) {
            const int64_t w = ow * s.sw - s.pw + (int64_t)c * s.dw;
            if (w < 0 || w >= s.iw) continue;
            const float q = pro.load(row + w);
            if (q > acc || q != q) acc = q;  // NaN propagates, as in PyTorch
          }
        }
      }
      v = acc;
    } else {
      // PyTorch's average: the window is clipped to the padded input for count_include_pad, to the
      // input itself for the sum and for the other divisor.
      int64_t d0 = od * s.sd - s.pd, h0 = oh * s.sh - s.ph, w0 = ow * s.sw - s.pw;
      int64_t d1 = min(d0 + s.kd, s.id + s.pd), h1 = min(h0 + s.kh, s.ih + s.ph), w1 = min(w0 + s.kw, s.iw + s.pw);
      const int64_t padded = (d1 - d0) * (h1 - h0) * (w1 - w0);
      d0 = max(d0, (int64_t)0);
      h0 = max(h0, (int64_t)0);
      w0 = max(w0, (int64_t)0);
      d1 = min(d1, s.id);
      h1 = min(h1, s.ih);
      w1 = min(w1, s.iw);
      float acc = 0.f;
      for (int64_t d = d0; d < d1; ++d)
        for (int64_t h = h0; h < h1; ++h) {
          const int64_t row = xp + (d * s.ih + h) * s.iw;
          for (int64_t w = w0; w < w1; ++w) acc += pro.load(row + w);
        }
      const int64_t count = s.divisor > 0 ? (int64_t)s.divisor
                                          : (s.count_include_pad ? padded : (d1 - d0) * (h1 - h0) * (w1 - w0));
      v = acc / (float)count;
    }
    y[e] = epi.apply(v, e);
  }
}

template <int MODE, class Pro, class Epi>
int stitch_pool_run(const Pro& pro, float* y, StitchPoolShape s, Epi epi, StitchLaunch cfg, cudaStream_t stream) {
  const int64_t total = s.planes * s.od * s.oh * s.ow;
  if (total <= 0) return (int)cudaGetLastError();
  const StitchLaunch c = stitch_launch_or(cfg, 256, 8);  // the launch table's knobs, else 256 and 8 per SM
  stitch_pool_kernel<MODE, Pro, Epi><<<stitch_grid(total, c.threads, c.per_sm), c.threads, 0, stream>>>(pro, y, s,
                                                                                                        epi);
  return (int)cudaGetLastError();
}
