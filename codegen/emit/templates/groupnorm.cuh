// lib groupnorm: group norm and instance norm. Each (sample, group) slab is `seg` contiguous floats.
// Where the slabs fit, one kernel does it all (`stitch_gn_onepass_kernel`: a block per slab, its head kept
// in shared memory). Otherwise two kernels over the same (slab, part) jobs: the statistics kernel sums
// each part with 16-byte loads into double partial sums (a slot per job in a stream-ordered workspace:
// no atomics, no zeroed buffer, the same sums on every run), and the apply kernel folds its slab's
// partials into the mean and 1/std and writes `(x - mean) * gamma[c] / std + beta[c]` through the group's
// epilogue (`stitch_gn_run`). A group whose normalised value is also an output keeps the statistics +
// finalize kernels (`stitch_gn_moments_run`: a per-(sample, channel) mean and scale) ahead of a generated
// elementwise kernel (bn_affine, as for batch norm).

// The mean and 1 / sqrt(var + eps) of `count` values from their sum and sum of squares: one formula for
// every path, so that they agree.
__host__ __device__ __forceinline__ void stitch_gn_moments(double sum, double sumsq, double count, float eps,
                                                           double* mean, double* inv_std) {
  *mean = sum / count;
  double var = sumsq / count - *mean * *mean;
  if (var < 0.0) var = 0.0;
  *inv_std = 1.0 / sqrt(var + (double)eps);
}

// Thread `tid`'s share (of `nthreads`) of elements [begin, end) of the slab whose first element is
// `first`: its sum and sum of squares, in double (16-byte loads when vec: begin, end and the slab start
// are multiples of 4 floats; four loads in flight, lib common's sweep).
template <class Pro>
__device__ __forceinline__ void stitch_gn_thread_sums(const Pro& pro, int64_t first, int64_t begin, int64_t end,
                                                      int tid, int nthreads, int vec, double* sum, double* sumsq) {
  double s = 0.0;
  double q = 0.0;
  if (vec) {
    stitch_sweep<4, 4>(pro, nullptr, first, begin + 4 * (int64_t)tid, end, 4 * (int64_t)nthreads,
                       [&](const float* v, int64_t) {
                         const double a = v[0], b = v[1], c = v[2], d = v[3];
                         s += (a + b) + (c + d);
                         q += (a * a + b * b) + (c * c + d * d);
                       });
  } else {
    stitch_sweep<4, 1>(pro, nullptr, first, begin + tid, end, nthreads, [&](const float* v, int64_t) {
      const double a = (double)v[0];
      s += a;
      q += a * a;
    });
  }
  *sum = s;
  *sumsq = q;
}

// The (slab, part) jobs of the statistics and apply kernels for `rows` slabs of `seg` floats, with
// `per_sm` blocks of l.threads resident on each of `sms` SMs.
struct StitchGnLaunch {
  int threads;
  int64_t splits, chunk;
  unsigned grid;
};

// Threads a block: 512 for long slabs, 256 else, and for a short slab only as many warps as it has float4s
// (GEMM + GroupNorm: slabs of 16-512 floats, where 256 threads would leave most of the block idle).
static inline int stitch_gn_threads(int64_t seg) {
  int threads = seg >= 4096 ? 512 : 256;
  const int64_t warps = ((seg + 3) / 4 + 31) / 32;  // at least 1: the caller launches only for seg >= 1
  if (warps * 32 < threads) threads = (int)(warps * 32);
  return threads;
}

static StitchGnLaunch stitch_gn_stats_launch(int64_t rows, int64_t seg, int64_t sms, int64_t per_sm) {
  StitchGnLaunch l;
  l.threads = stitch_gn_threads(seg);
  if (per_sm < 1) per_sm = 1;
  const int64_t full = sms * per_sm;
  // Fewer slabs than resident blocks: split each into as many parts as keep the jobs within one wave
  // (a second, partial wave would leave most SMs idle while it drains), each part at least 8 floats a
  // thread. More slabs: one job a slab, and the grid strides over them with the SMs full (half a million
  // 16-float slabs would otherwise be half a million blocks).
  const int64_t want = rows < full ? full / rows : 1;
  const int64_t most = (seg + l.threads * 8 - 1) / (l.threads * 8);
  l.splits = want > most ? (most < 1 ? 1 : most) : want;
  l.chunk = (seg + l.splits - 1) / l.splits;
  l.chunk = (l.chunk + 3) / 4 * 4;
  l.splits = (seg + l.chunk - 1) / l.chunk;  // rounding the chunk up can leave the last part empty
  const int64_t jobs = rows * l.splits;
  const int64_t grid = jobs < full ? jobs : full;
  l.grid = (unsigned)(grid < 1 ? 1 : grid);
  return l;
}

#ifndef STITCH_HOST_EMULATION
// Job `job` of the (slab, part) grid: its slab and the part's elements [begin, end) within the slab.
struct StitchGnJob {
  int64_t row, begin, end;
};

__device__ __forceinline__ StitchGnJob stitch_gn_job(int64_t job, int64_t seg, int64_t chunk, int64_t splits) {
  StitchGnJob j;
  j.row = job / splits;
  j.begin = (job % splits) * chunk;
  j.end = min(j.begin + chunk, seg);
  return j;
}

// Channel c's scale gamma[c] / std, in float: the same product on every path.
__device__ __forceinline__ float stitch_gn_scale(const float* gamma, int64_t c, float inv_std) {
  return gamma != nullptr ? gamma[c] * inv_std : inv_std;
}

// part[2 * job] and part[2 * job + 1]: the sum and sum of squares of job `job`'s elements.
template <class Pro>
__global__ void stitch_gn_stats_kernel(Pro pro, double* part, int64_t rows, int64_t seg, int64_t chunk, int64_t splits,
                                       int vec) {
  __shared__ double red[32];
  for (int64_t job = blockIdx.x; job < rows * splits; job += gridDim.x) {
    const StitchGnJob j = stitch_gn_job(job, seg, chunk, splits);
    double s = 0.0;
    double q = 0.0;
    stitch_gn_thread_sums(pro, j.row * seg, j.begin, j.end, (int)threadIdx.x, (int)blockDim.x, vec, &s, &q);
    s = stitch_block_reduce(s, StitchSumOp(), 0.0, red);
    q = stitch_block_reduce(q, StitchSumOp(), 0.0, red);
    if (threadIdx.x == 0) {
      part[2 * job] = s;
      part[2 * job + 1] = q;
    }
  }
}

// Slab `row`'s sum and sum of squares from its `splits` partial pairs, summed in order.
__device__ __forceinline__ void stitch_gn_slab_sums(const double* part, int64_t row, int64_t splits, double* sum,
                                                    double* sumsq) {
  double s = 0.0;
  double q = 0.0;
  for (int64_t k = row * splits; k < (row + 1) * splits; ++k) {
    s += part[2 * k];
    q += part[2 * k + 1];
  }
  *sum = s;
  *sumsq = q;
}

// Each job's block folds its slab's partial sums (every thread the same few loads, cached), then writes its
// part: channel k of the slab's group takes gamma[c] / std and beta[c] (vec: hw % 4 == 0, so a float4 lies
// within one channel).
template <class Pro, class Epi>
__global__ void stitch_gn_apply_kernel(Pro pro, Epi epi, float* y, const float* gamma, const float* beta,
                                       const double* part, int64_t rows, int64_t seg, int64_t hw, int64_t groups,
                                       int64_t chunk, int64_t splits, float eps, int vec) {
  const int64_t cpg = seg / hw;  // channels per group
  const bool narrow = seg <= 0xffffffffLL;  // 32-bit division for the channel
  for (int64_t job = blockIdx.x; job < rows * splits; job += gridDim.x) {
    const StitchGnJob j = stitch_gn_job(job, seg, chunk, splits);
    double s, q, mean, inv_std;
    stitch_gn_slab_sums(part, j.row, splits, &s, &q);
    stitch_gn_moments(s, q, (double)seg, eps, &mean, &inv_std);
    const float mean_f = (float)mean;
    const float inv_f = (float)inv_std;
    const int64_t c0 = (j.row % groups) * cpg;
    const int64_t base = j.row * seg;
    const auto put = [&](const float* t, int64_t at, int n) {
      const int64_t k = cpg == 1 ? 0 : (narrow ? (int64_t)((uint32_t)at / (uint32_t)hw) : at / hw);
      const float scale = stitch_gn_scale(gamma, c0 + k, inv_f);
      float out[4];
      for (int u = 0; u < n; ++u) {
        const float v = (t[u] - mean_f) * scale;
        out[u] = epi.apply(beta != nullptr ? v + beta[c0 + k] : v, base + at + u);
      }
      if (n == 4) {
        stitch_st4(y + base + at, out);
      } else {
        y[base + at] = out[0];
      }
    };
    if (vec) {
      stitch_sweep<4, 4>(pro, nullptr, base, j.begin + 4 * (int64_t)threadIdx.x, j.end, 4 * (int64_t)blockDim.x,
                         [&](const float* t, int64_t at) { put(t, at, 4); });
    } else {
      stitch_sweep<4, 1>(pro, nullptr, base, j.begin + threadIdx.x, j.end, (int64_t)blockDim.x,
                         [&](const float* t, int64_t at) { put(t, at, 1); });
    }
  }
}

__global__ void stitch_gn_finalize_kernel(const double* part, int64_t splits, const float* weight, float* mean_out,
                                          float* scale_out, int64_t N, int64_t C, int64_t G, int64_t seg, float eps) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C) return;
  const int64_t c = i % C;
  double s, q, mean, inv_std;
  stitch_gn_slab_sums(part, (i / C) * G + c / (C / G), splits, &s, &q);
  stitch_gn_moments(s, q, (double)seg, eps, &mean, &inv_std);
  mean_out[i] = (float)mean;
  scale_out[i] = stitch_gn_scale(weight, c, (float)inv_std);
}

// Blocks of `threads` resident per SM for `kernel`, asked once per (kernel, threads) and remembered.
template <class Kernel>
static int stitch_gn_resident(Kernel kernel, int threads) {
  struct Known {
    const void* kernel;
    int threads, blocks;
  };
  static Known known[16] = {};
  const void* key = reinterpret_cast<const void*>(kernel);
  for (const Known& k : known) {
    if (k.kernel == key && k.threads == threads) return k.blocks;
  }
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, 0) != cudaSuccess || blocks < 1) {
    (void)cudaGetLastError();
    blocks = 2048 / threads;
  }
  if (blocks > 32) blocks = 32;
  for (Known& k : known) {
    if (k.kernel == nullptr) {
      k = Known{key, threads, blocks};
      break;
    }
  }
  return blocks;
}

// Statistics (into a stream-ordered workspace of two doubles a job), then then(plan, workspace).
template <class Pro, class Then>
static int stitch_gn_stats_then(const Pro& pro, const StitchGnLaunch& l, int64_t rows, int64_t seg, Then then,
                                cudaStream_t stream) {
  const int vec = (seg % 4 == 0) && pro.vec_ok();
  return stitch_with_workspace<double>(2 * rows * l.splits, stream, [&](double* part) {
    stitch_gn_stats_kernel<Pro><<<l.grid, l.threads, 0, stream>>>(pro, part, rows, seg, l.chunk, l.splits, vec);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) err = (cudaError_t)then(part);
    return (int)err;
  });
}

// Pro: StitchInput (the tensor) or a group's StitchPro_* functor (its elementwise prologue, e.g. a
// conv's bias and epilogue, applied on load; its launcher is generated with the group). The statistics
// and finalize kernels: a per-(sample, channel) mean and scale for the group's elementwise kernel.
template <class Pro>
static int stitch_gn_moments_run(const Pro& pro, const float* weight, float* mean_out, float* scale_out, int64_t N,
                                 int64_t C, int64_t G, int64_t seg, float eps, cudaStream_t stream) {
  const int64_t rows = N * G;
  if (rows * seg <= 0) return (int)cudaGetLastError();
  const int per_sm = stitch_gn_resident(stitch_gn_stats_kernel<Pro>, stitch_gn_threads(seg));
  const StitchGnLaunch l = stitch_gn_stats_launch(rows, seg, stitch_sm_count(), per_sm);
  return stitch_gn_stats_then(pro, l, rows, seg, [&](const double* part) {
    const int threads = 128;
    const unsigned grid = (unsigned)((N * C + threads - 1) / threads);
    stitch_gn_finalize_kernel<<<grid, threads, 0, stream>>>(part, l.splits, weight, mean_out, scale_out, N, C, G, seg,
                                                            eps);
    return (int)cudaGetLastError();
  }, stream);
}

extern "C" int stitch_gn_moments(const float* x, const float* weight, float* mean_out, float* scale_out, int64_t N,
                                 int64_t C, int64_t G, int64_t seg, float eps, cudaStream_t stream) {
  return stitch_gn_moments_run(StitchInput{x}, weight, mean_out, scale_out, N, C, G, seg, eps, stream);
}
// ---- one pass per slab (the group's `onepass` launch knob) ----------------------------------------------
// Slabs of at least one per SM: one persistent block per SM takes a slab at a time, sums it (double), and
// writes (x - mean) * scale[c] + beta[c] through the group's epilogue. The slab's head (`cached` floats, a
// multiple of 4) stays in opt-in shared memory and its tail is read again while it is still in L2 (the
// launcher checks that the tails in flight fit), so DRAM sees the input once where the statistics,
// finalize and elementwise kernels read it twice (lib softmax's long-row kernel does the same).
#define STITCH_GN_ONEPASS_CHANNELS 1024  // channels per group the per-channel scale and shift slots hold

template <class Pro, class Epi>
__global__ void __launch_bounds__(1024) stitch_gn_onepass_kernel(Pro pro, Epi epi, float* y, const float* gamma,
                                                                 const float* beta, int64_t rows, int64_t seg,
                                                                 int64_t hw, int64_t groups, int64_t cached, float eps,
                                                                 int vec) {
  extern __shared__ float stitch_gn_head[];
  __shared__ double red[32];
  __shared__ float scale_c[STITCH_GN_ONEPASS_CHANNELS];
  __shared__ float shift_c[STITCH_GN_ONEPASS_CHANNELS];
  const int64_t cpg = seg / hw;  // channels per group
  const int64_t step = (vec ? 4 : 1) * (int64_t)blockDim.x;
  const int64_t start = (vec ? 4 : 1) * (int64_t)threadIdx.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * seg;
    double s = 0.0;
    double q = 0.0;
    const auto take = [&](const float* t, int64_t j, int n) {
      stitch_head_keep(stitch_gn_head, j, cached, t, n);
      for (int k = 0; k < n; ++k) {
        const double a = (double)t[k];
        s += a;
        q += a * a;
      }
    };
    if (vec) {
      stitch_sweep<4, 4>(pro, nullptr, base, start, seg, step, [&](const float* t, int64_t j) { take(t, j, 4); });
    } else {
      stitch_sweep<4, 1>(pro, nullptr, base, start, seg, step, [&](const float* t, int64_t j) { take(t, j, 1); });
    }
    s = stitch_block_reduce(s, StitchSumOp(), 0.0, red);
    q = stitch_block_reduce(q, StitchSumOp(), 0.0, red);
    double mean, inv_std;
    stitch_gn_moments(s, q, (double)seg, eps, &mean, &inv_std);
    const float mean_f = (float)mean;
    const int64_t g = row % groups;
    for (int64_t k = threadIdx.x; k < cpg; k += blockDim.x) {
      const int64_t c = g * cpg + k;
      scale_c[k] = stitch_gn_scale(gamma, c, (float)inv_std);
      shift_c[k] = beta != nullptr ? beta[c] : 0.f;
    }
    __syncthreads();  // the scales are written, the head is complete
    for (int64_t j = start; j < seg; j += step) {
      float t[4];
      const int n = stitch_head_or_tail(pro, stitch_gn_head, base, j, cached, vec != 0, t);
      const int64_t k = cpg == 1 ? 0 : j / hw;  // vec: hw % 4 == 0, so the four share a channel
      const float scale = scale_c[k], shift = shift_c[k];
      float out[4];
      for (int u = 0; u < n; ++u) {
        const float v = (t[u] - mean_f) * scale;
        out[u] = epi.apply(beta != nullptr ? v + shift : v, base + j + u);
      }
      if (vec) {
        stitch_st4(y + base + j, out);
      } else {
        y[base + j] = out[0];
      }
    }
    __syncthreads();  // the next slab overwrites the head and the scales
  }
}

// Launches the one-pass kernel when the slabs qualify (*launched = 1); nothing otherwise (*launched = 0).
template <class Pro, class Epi>
static int stitch_gn_onepass_run(const Pro& pro, const Epi& epi, float* y, const float* gamma, const float* beta,
                                 int64_t rows, int64_t seg, int64_t hw, int64_t groups, float eps, int knob_threads,
                                 int64_t* launched, cudaStream_t stream) {
  *launched = 0;
  if (rows <= 0 || seg <= 0 || hw <= 0 || seg % hw != 0 || seg / hw > STITCH_GN_ONEPASS_CHANNELS) return 0;
  // Static slots: the scales and shifts (8 KiB) and the reduction's 256 bytes, with 1 KiB to spare.
  const int64_t cached = stitch_long_row_head(rows, seg, 9472);
  if (cached < 0) return 0;
  const size_t smem = (size_t)cached * sizeof(float);
  static size_t granted[64] = {0};  // the opt-in, per device, once per instantiation
  if (!stitch_grant_smem(stitch_gn_onepass_kernel<Pro, Epi>, smem, granted)) return 0;
  const int vec = hw % 4 == 0 && pro.vec_ok() && stitch_aligned16(y);
  const int threads = stitch_threads_or(knob_threads, 1024);
  const int64_t sms = stitch_sm_count();
  const unsigned grid = (unsigned)(rows < sms ? rows : sms);
  stitch_gn_onepass_kernel<Pro, Epi><<<grid, threads, smem, stream>>>(pro, epi, y, gamma, beta, rows, seg, hw, groups,
                                                                      cached, eps, vec);
  *launched = 1;
  return (int)cudaGetLastError();
}

// A group whose one output is the norm (through its epilogue): the one-pass kernel when `onepass` is set and
// the slabs qualify (*passes = 1), else statistics and apply (*passes = 2).
template <class Pro, class Epi>
static int stitch_gn_run(const Pro& pro, const Epi& epi, float* y, const float* gamma, const float* beta, int64_t rows,
                         int64_t seg, int64_t hw, int64_t groups, float eps, int onepass, int knob_threads,
                         int64_t* passes, cudaStream_t stream) {
  *passes = 0;
  if (rows * seg <= 0) return (int)cudaGetLastError();
  if (hw <= 0 || seg % hw != 0 || groups <= 0) return (int)cudaErrorInvalidValue;
  if (onepass) {
    const int err = stitch_gn_onepass_run(pro, epi, y, gamma, beta, rows, seg, hw, groups, eps, knob_threads, passes,
                                          stream);
    if (err != 0 || *passes == 1) return err;
  }
  *passes = 2;
  const int threads = stitch_gn_threads(seg);
  const int stats_sm = stitch_gn_resident(stitch_gn_stats_kernel<Pro>, threads);
  const int apply_sm = stitch_gn_resident(stitch_gn_apply_kernel<Pro, Epi>, threads);
  const StitchGnLaunch l = stitch_gn_stats_launch(rows, seg, stitch_sm_count(), stats_sm < apply_sm ? stats_sm : apply_sm);
  const int vec = seg % 4 == 0 && hw % 4 == 0 && pro.vec_ok() && stitch_aligned16(y);
  return stitch_gn_stats_then(pro, l, rows, seg, [&](const double* part) {
    stitch_gn_apply_kernel<Pro, Epi><<<l.grid, l.threads, 0, stream>>>(pro, epi, y, gamma, beta, part, rows, seg, hw,
                                                                       groups, l.chunk, l.splits, eps, vec);
    return (int)cudaGetLastError();
  }, stream);
}
#endif  // STITCH_HOST_EMULATION
