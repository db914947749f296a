// lib layout: kernels that only move data (codegen/frontend/layout_ops.py). Every output is a fresh
// contiguous tensor written with consecutive threads on consecutive elements; Epi::apply(v, e) fuses
// the group's elementwise epilogue into the store.
// - gather: y[e] = x[offset(e)] for a strided view x (contiguous(), clone(), a permuted view's copy);
//   MODE 1 / 2 keep the lower / upper triangle of the last two dims (tril / triu), zeros elsewhere;
// - concat: every part p of a concatenation along one dim copies its [outer, size_p, inner] block into
//   columns [start_p, start_p + size_p) of the [outer, total, inner] output; one launch covers all
//   parts, each part's blocks in proportion to its size (a block finds its part once); float4 copies
//   where aligned;
// - fill: y[e] = value (zeros_like, ones_like, full_like);
// - window: y[e] = x at the output's coordinates moved by lo[d] per dim: MODE 3 pads (a coordinate
//   outside the input reads `fill`; a negative lo crops: F.pad), MODE 4 wraps (torch.roll); two
//   consecutive windows are one pass: MODE 5 rolls by shift[d] then pads, MODE 6 pads then rolls;
// - nll_pick: cross entropy's per-sample pick of the target class and its weight.
// Gather (MODE 0) and window kernels move a float4 per thread (VEC) when the innermost dim is whole
// float4s read with stride 1, untouched by the window, and every other stride keeps rows 16-byte
// aligned: four consecutive outputs are then one float4 of the input, with one offset computed.

#define STITCH_MAX_DIMS 8

struct StitchStrides {
  int nd;
  int64_t size[STITCH_MAX_DIMS];
  int64_t stride[STITCH_MAX_DIMS];
};

// Element offset in a strided tensor of the e-th element in row-major order of its sizes; I is the
// index type (32-bit when every index and offset fits: integer division is the kernel's main cost).
template <class I>
__device__ __forceinline__ I stitch_strided_offset(const StitchStrides& s, I e) {
  I off = 0;
#pragma unroll
  for (int d = STITCH_MAX_DIMS - 1; d >= 0; --d) {
    if (d < s.nd) {
      const I size = (I)s.size[d];
      const I q = e / size;
      off += (e - q * size) * (I)s.stride[d];
      e = q;
    }
  }
  return off;
}

// Four outputs e..e+3 from one float4 of x at `off`, through the epilogue.
template <class Epi>
__device__ __forceinline__ void stitch_move4(const float* __restrict__ x, int64_t off, float* __restrict__ y,
                                             int64_t e, const Epi& epi) {
  const float4 v = *reinterpret_cast<const float4*>(x + off);
  float4 r;
  r.x = epi.apply(v.x, e);
  r.y = epi.apply(v.y, e + 1);
  r.z = epi.apply(v.z, e + 2);
  r.w = epi.apply(v.w, e + 3);
  *reinterpret_cast<float4*>(y + e) = r;
}

template <int MODE, class I, class Epi, bool VEC = false>
__global__ void stitch_gather_kernel(const float* __restrict__ x, float* __restrict__ y, StitchStrides s,
                                     int64_t n, int64_t diag, Epi epi) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  if (VEC) {  // MODE 0, n a multiple of 4 (the host checks the layout: stitch_rows4)
    for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < n / 4; q += step) {
      stitch_move4(x, (int64_t)stitch_strided_offset<I>(s, (I)(4 * q)), y, 4 * q, epi);
    }
    return;
  }
  const I cols = s.nd >= 1 ? (I)s.size[s.nd - 1] : 1;
  const I rows = s.nd >= 2 ? (I)s.size[s.nd - 2] : 1;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
    float v;
    if (MODE == 0) {
      v = x[stitch_strided_offset<I>(s, (I)e)];
    } else {
      const int64_t col = (int64_t)((I)e % cols);
      const int64_t row = (int64_t)(((I)e / cols) % rows);
      const bool keep = MODE == 1 ? col - row <= diag : col - row >= diag;
      v = keep ? x[stitch_strided_offset<I>(s, (I)e)] : 0.0f;
    }
    y[e] = epi.apply(v, e);
  }
}

#ifndef STITCH_HOST_EMULATION  // tests/codegen/test_layout_kernels.py runs the kernels' index math on the CPU
// 32-bit index math suffices when every element index and every offset read fits (`sizes`: the
// extents the offsets walk, `s.stride` their strides): integer division is these kernels' main cost.
static bool stitch_fits_32(int64_t n, const StitchStrides& s, const int64_t* sizes) {
  int64_t reach = 0;  // the largest offset read
  for (int d = 0; d < s.nd; ++d) reach += (sizes[d] - 1) * s.stride[d];
  return n < 2147483647LL && reach < 2147483647LL;
}

// Can four consecutive outputs be one float4 of x (module comment)? For a window, `lo`, `in_size` and
// `shift` must leave the innermost dim untouched (nullptr: a gather).
static bool stitch_rows4(const float* x, const float* y, const StitchStrides& s, const int64_t* lo,
                         const int64_t* in_size, const int64_t* shift) {
  const int last = s.nd - 1;
  if (last < 0 || s.size[last] % 4 != 0 || s.stride[last] != 1 || !stitch_aligned16(x) || !stitch_aligned16(y)) {
    return false;
  }
  if (lo != nullptr && (lo[last] != 0 || shift[last] != 0 || in_size[last] != s.size[last])) return false;
  for (int d = 0; d < last; ++d) {
    if (s.stride[d] % 4 != 0) return false;
  }
  return true;
}

// One grid-stride launch over n elements, `launch(index, blocks, threads)` instantiating the kernel
// with 32- or 64-bit indices (the index argument's type); `cfg` from the launch table (256 threads and
// an uncapped grid by default).
template <class Launch>
static int stitch_launch_indexed(int64_t n, bool narrow, StitchLaunch cfg, Launch launch) {
  if (n <= 0) return (int)cudaGetLastError();
  const StitchLaunch c = stitch_launch_or(cfg, 256, 0);
  const unsigned blocks = stitch_grid(n, c.threads, c.per_sm);
  if (narrow) {
    launch(uint32_t{}, blocks, c.threads);
  } else {
    launch(uint64_t{}, blocks, c.threads);
  }
  return (int)cudaGetLastError();
}

// Sizes and strides arrive outermost first; the host has already merged dims that are contiguous
// with each other (contiguous / clone only: a triangle mask needs its last two dims).
template <int MODE, class Epi>
static int stitch_gather_run(const float* x, float* y, const StitchStrides& s, int64_t n, int64_t diag,
                             const Epi& epi, StitchLaunch cfg, cudaStream_t stream) {
  const bool vec = MODE == 0 && stitch_rows4(x, y, s, nullptr, nullptr, nullptr);
  return stitch_launch_indexed(vec ? n / 4 : n, stitch_fits_32(n, s, s.size), cfg,
                               [&](auto index, unsigned blocks, int threads) {
                                 using I = decltype(index);
                                 if (vec) {
                                   stitch_gather_kernel<MODE, I, Epi, true><<<blocks, threads, 0, stream>>>(
                                       x, y, s, n, diag, epi);
                                 } else {
                                   stitch_gather_kernel<MODE, I, Epi><<<blocks, threads, 0, stream>>>(x, y, s, n,
                                                                                                   diag, epi);
                                 }
                               });
}
#endif

struct StitchWindow {
  int64_t lo[STITCH_MAX_DIMS];       // pad: elements added before the input (negative: cropped); roll: shift
  int64_t in_size[STITCH_MAX_DIMS];  // the input's sizes (StitchStrides holds the output's sizes)
  int64_t shift[STITCH_MAX_DIMS];    // MODE 5 / 6: the roll's shift (lo is then the pad's)
};

// c modulo size in [0, size) (torch.roll's wrap; c may be negative).
__device__ __forceinline__ int64_t stitch_wrap(int64_t c, int64_t size) {
  c %= size;
  return c < 0 ? c + size : c;
}

// The input offset of the output's e-th element (row-major in s.size), or -1 for a padding element.
// Each dim undoes the window's stages from the output back: a roll wraps within the size it rolled,
// a pad moves by lo and tests the input's range.
template <int MODE, class I>
__device__ __forceinline__ int64_t stitch_window_offset(const StitchStrides& s, const StitchWindow& w, I e) {
  int64_t off = 0;
  bool inside = true;
#pragma unroll
  for (int d = STITCH_MAX_DIMS - 1; d >= 0; --d) {
    if (d < s.nd) {
      const I size = (I)s.size[d];
      const I q = e / size;
      int64_t c = (int64_t)(e - q * size);
      e = q;
      if (MODE == 6) c = stitch_wrap(c - w.shift[d], s.size[d]);  // the roll came last
      c -= w.lo[d];
      if (MODE == 4) {
        c = stitch_wrap(c, w.in_size[d]);
      } else if (c < 0 || c >= w.in_size[d]) {
        inside = false;
      } else if (MODE == 5) {
        c = stitch_wrap(c - w.shift[d], w.in_size[d]);  // the roll came first
      }
      off += c * s.stride[d];
    }
  }
  return inside ? off : -1;
}

template <int MODE, class I, class Epi, bool VEC = false>
__global__ void stitch_window_kernel(const float* __restrict__ x, float* __restrict__ y, StitchStrides s,
                                     StitchWindow w, int64_t n, float fill, Epi epi) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  if (VEC) {  // the innermost dim is untouched: four outputs share their padding test and their row
    for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < n / 4; q += step) {
      const int64_t e = 4 * q;
      const int64_t o = stitch_window_offset<MODE, I>(s, w, (I)e);
      if (o >= 0) {
        stitch_move4(x, o, y, e, epi);
      } else {
        for (int k = 0; k < 4; ++k) y[e + k] = epi.apply(fill, e + k);
      }
    }
    return;
  }
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t o = stitch_window_offset<MODE, I>(s, w, (I)e);
    y[e] = epi.apply(o < 0 ? fill : x[o], e);
  }
}

#ifndef STITCH_HOST_EMULATION
// Sizes are the output's, strides the input's, both outermost first (no dims merged).
template <int MODE, class Epi>
static int stitch_window_run(const float* x, float* y, const StitchStrides& s, const StitchWindow& w, int64_t n,
                             float fill, const Epi& epi, StitchLaunch cfg, cudaStream_t stream) {
  const bool vec = stitch_rows4(x, y, s, w.lo, w.in_size, w.shift);
  return stitch_launch_indexed(vec ? n / 4 : n, stitch_fits_32(n, s, w.in_size), cfg,
                               [&](auto index, unsigned blocks, int threads) {
                                 using I = decltype(index);
                                 if (vec) {
                                   stitch_window_kernel<MODE, I, Epi, true><<<blocks, threads, 0, stream>>>(
                                       x, y, s, w, n, fill, epi);
                                 } else {
                                   stitch_window_kernel<MODE, I, Epi><<<blocks, threads, 0, stream>>>(x, y, s, w, n,
                                                                                                   fill, epi);
                                 }
                               });
}
#endif

// nll_pick: per sample e of the [outer, inner] target, y[e] = x[(o * classes + t) * inner + i] (0 when
// t == ignore, NaN when t is outside [0, classes): PyTorch raises there) and y[n + e] = 1 or 0 for
// whether the sample counts (cross entropy's pick and weight, one pass over the targets).
__global__ void stitch_nll_pick_kernel(const float* __restrict__ x, const int64_t* __restrict__ t,
                                       float* __restrict__ y, int64_t n, int64_t classes, int64_t inner,
                                       int64_t ignore) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t c = t[e];
    const bool counts = c != ignore;
    float v = 0.0f;
    if (counts) {
      const int64_t o = e / inner;
      v = (c >= 0 && c < classes) ? x[(o * classes + c) * inner + (e - o * inner)] : NAN;
    }
    y[e] = v;
    y[n + e] = counts ? 1.0f : 0.0f;
  }
}

#ifndef STITCH_HOST_EMULATION
static int stitch_nll_pick_run(const float* x, const int64_t* t, float* y, int64_t n, int64_t classes,
                               int64_t inner, int64_t ignore, cudaStream_t stream) {
  if (n <= 0) return (int)cudaGetLastError();
  const int threads = 256;
  stitch_nll_pick_kernel<<<stitch_grid(n, threads, 0), threads, 0, stream>>>(x, t, y, n, classes, inner, ignore);
  return (int)cudaGetLastError();
}
#endif

template <int N>
struct StitchConcatParts {
  const float* ptr[N];
  int64_t start[N + 1];  // prefix sums of the parts' sizes along the concatenated dim
  unsigned first_block[N + 1];  // prefix sums of the blocks each part gets (the launcher sets them)
};

// Whether a part moves float4s: its rows (`lo`..`hi` along the joined dim, times `inner`) and its
// slice start are whole float4s, both pointers 16-byte aligned. The kernel and the launcher's block
// count ask the same question.
__host__ __device__ __forceinline__ bool stitch_concat_vec(const float* x, const float* y, int64_t lo, int64_t hi,
                                                           int64_t total, int64_t inner) {
  return ((hi - lo) * inner) % 4 == 0 && (total * inner) % 4 == 0 && (lo * inner) % 4 == 0 && stitch_aligned16(x) &&
         stitch_aligned16(y);
}

// What a thread copies (blocks are dealt to parts in proportion to their sizes): its block's part (the
// input, its rows lo..hi along the joined dim), the thread's first work item within the part's blocks,
// and the stride over them.
struct StitchConcatPart {
  const float* x;
  int64_t lo, hi;
  int64_t first, step;
};

// Picked with fixed indices: indexing the parameter struct by a run-time value makes every thread copy
// the struct to local memory first (a 96-byte stack frame a thread for four parts: 2.8x slower on an H100).
template <int N>
__device__ __forceinline__ StitchConcatPart stitch_concat_part(const StitchConcatParts<N>& p) {
  const float* x = p.ptr[0];
  int64_t lo = p.start[0], hi = p.start[1];
  unsigned first_block = p.first_block[0], end_block = p.first_block[1];
#pragma unroll
  for (int k = 1; k < N; ++k) {
    if (blockIdx.x >= p.first_block[k]) {
      x = p.ptr[k];
      lo = p.start[k];
      hi = p.start[k + 1];
      first_block = p.first_block[k];
      end_block = p.first_block[k + 1];
    }
  }
  return StitchConcatPart{x, lo, hi, (int64_t)(blockIdx.x - first_block) * blockDim.x + threadIdx.x,
                          (int64_t)(end_block - first_block) * blockDim.x};
}

template <int N, class Epi>
__global__ void stitch_concat_kernel(StitchConcatParts<N> p, float* __restrict__ y, int64_t outer, int64_t total,
                                     int64_t inner, Epi epi) {
  const StitchConcatPart part = stitch_concat_part(p);
  const float* __restrict__ x = part.x;
  const int64_t lo = part.lo, hi = part.hi, first = part.first, step = part.step;
  const int64_t block = (hi - lo) * inner;  // one outer slice of this part
  const int64_t n = outer * block;
  const int64_t base = lo * inner;
  const bool narrow = ((uint64_t)n >> 31) == 0;
  // 16-byte loads and stores when this part's rows and its slice start are whole float4s (the choice
  // is the same for every thread of the block: a block copies one part).
  if (stitch_concat_vec(x, y, lo, hi, total, inner)) {
    for (int64_t q = first; q < n / 4; q += step) {
      const int64_t k = q * 4;
      const int64_t o = narrow ? (int64_t)((uint32_t)k / (uint32_t)block) : k / block;
      stitch_move4(x, k, y, o * total * inner + base + (k - o * block), epi);
    }
    return;
  }
  for (int64_t k = first; k < n; k += step) {
    const int64_t o = narrow ? (int64_t)((uint32_t)k / (uint32_t)block) : k / block;
    const int64_t e = o * total * inner + base + (k - o * block);
    y[e] = epi.apply(x[k], e);
  }
}

// Every part's slices long and in float4s (stitch_concat_slices): blockIdx.y walks the outer index and a
// part's blocks stride over its contiguous slice of it, so no thread divides to find its place, and each
// thread issues STITCH_CONCAT_UNROLL 16-byte loads before its first store.
#define STITCH_CONCAT_UNROLL 4
#define STITCH_CONCAT_SLICE_MIN 4096  // floats a part's slice at least (shorter: the kernel above)
template <int N, class Epi>
__global__ void stitch_concat_slices_kernel(StitchConcatParts<N> p, float* __restrict__ y, int64_t outer,
                                            int64_t total, int64_t inner, Epi epi) {
  const StitchConcatPart part = stitch_concat_part(p);
  const int64_t slice4 = (part.hi - part.lo) * inner / 4;
  const int64_t first = part.first, step = part.step;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    const float* __restrict__ xs = part.x + o * slice4 * 4;  // this outer index's slice
    const int64_t out = (o * total + part.lo) * inner;  // the slice's first output element
    for (int64_t q = first; q < slice4; q += step * STITCH_CONCAT_UNROLL) {
      float4 v[STITCH_CONCAT_UNROLL];  // U loads, then U stores
#pragma unroll
      for (int u = 0; u < STITCH_CONCAT_UNROLL; ++u) {
        if (q + u * step < slice4) v[u] = __ldg(reinterpret_cast<const float4*>(xs + 4 * (q + u * step)));
      }
#pragma unroll
      for (int u = 0; u < STITCH_CONCAT_UNROLL; ++u) {
        if (q + u * step < slice4) {
          const int64_t e = out + 4 * (q + u * step);
          stitch_st4_v(y + e, make_float4(epi.apply(v[u].x, e), epi.apply(v[u].y, e + 1), epi.apply(v[u].z, e + 2),
                                          epi.apply(v[u].w, e + 3)));
        }
      }
    }
  }
}

template <int N>
static bool stitch_concat_slices(const StitchConcatParts<N>& p, const float* y, int64_t total, int64_t inner) {
  for (int i = 0; i < N; ++i) {
    const int64_t slice = (p.start[i + 1] - p.start[i]) * inner;
    if (slice < STITCH_CONCAT_SLICE_MIN || !stitch_concat_vec(p.ptr[i], y, p.start[i], p.start[i + 1], total, inner)) {
      return false;
    }
  }
  return true;
}

// A part's work items: float4s where it moves them, else elements.
template <int N>
static int64_t stitch_concat_units(const StitchConcatParts<N>& p, int part, const float* y, int64_t outer,
                                   int64_t total, int64_t inner) {
  const int64_t n = outer * (p.start[part + 1] - p.start[part]) * inner;
  return stitch_concat_vec(p.ptr[part], y, p.start[part], p.start[part + 1], total, inner) ? n / 4 : n;
}

template <int N>
static int64_t stitch_concat_all_units(const StitchConcatParts<N>& p, const float* y, int64_t outer, int64_t total,
                                       int64_t inner) {
  int64_t all = 0;
  for (int i = 0; i < N; ++i) all += stitch_concat_units(p, i, y, outer, total, inner);
  return all;
}

// Blocks for each part in proportion to its work items (at least one each), out of one grid-stride
// launch's worth for all of them together (`grid`, sized from stitch_concat_all_units), so that every
// block does about the same work and no block of a small part waits idle (N parts of very different
// sizes: DenseNet, Inception) or finds nothing to do (a grid sized by elements while the parts move
// float4s would start four times the threads needed).
template <int N>
static unsigned stitch_concat_blocks(StitchConcatParts<N>& p, const float* y, int64_t outer, int64_t total,
                                     int64_t inner, unsigned grid) {
  const int64_t all = stitch_concat_all_units(p, y, outer, total, inner);
  p.first_block[0] = 0;
  for (int i = 0; i < N; ++i) {
    const int64_t n = stitch_concat_units(p, i, y, outer, total, inner);
    int64_t blocks = all > 0 ? (int64_t)((double)grid * (double)n / (double)all + 0.5) : 0;
    if (blocks < 1) blocks = 1;
    p.first_block[i + 1] = p.first_block[i] + (unsigned)blocks;
  }
  return p.first_block[N];
}

#ifndef STITCH_HOST_EMULATION
template <int N, class Epi>
static int stitch_concat_run(StitchConcatParts<N> p, float* y, int64_t outer, int64_t total, int64_t inner,
                             const Epi& epi, StitchLaunch cfg, cudaStream_t stream) {
  const int64_t all = stitch_concat_all_units(p, y, outer, total, inner);
  if (all <= 0) return (int)cudaGetLastError();
  const StitchLaunch c = stitch_launch_or(cfg, 256, 0);
  if (stitch_concat_slices(p, y, total, inner)) {  // the blocks of one outer index, dealt to the parts
    const int64_t gy = outer < 65535 ? outer : 65535;
    const int64_t blocks = stitch_grid((all + STITCH_CONCAT_UNROLL - 1) / STITCH_CONCAT_UNROLL, c.threads, c.per_sm);
    const unsigned gx = stitch_concat_blocks(p, y, outer, total, inner, (unsigned)((blocks + gy - 1) / gy));
    stitch_concat_slices_kernel<N, Epi><<<dim3(gx, (unsigned)gy), c.threads, 0, stream>>>(p, y, outer, total, inner,
                                                                                          epi);
    return (int)cudaGetLastError();
  }
  const unsigned blocks = stitch_concat_blocks(p, y, outer, total, inner, stitch_grid(all, c.threads, c.per_sm));
  stitch_concat_kernel<N, Epi><<<blocks, c.threads, 0, stream>>>(p, y, outer, total, inner, epi);
  return (int)cudaGetLastError();
}
#endif

template <class Epi>
__global__ void stitch_fill_kernel(float* __restrict__ y, int64_t n, float value, Epi epi) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) y[e] = epi.apply(value, e);
}

#ifndef STITCH_HOST_EMULATION
template <class Epi>
static int stitch_fill_run(float* y, int64_t n, float value, const Epi& epi, cudaStream_t stream) {
  if (n <= 0) return (int)cudaGetLastError();
  const int threads = 256;
  stitch_fill_kernel<Epi><<<stitch_grid(n, threads, 0), threads, 0, stream>>>(y, n, value, epi);
  return (int)cudaGetLastError();
}
#endif
