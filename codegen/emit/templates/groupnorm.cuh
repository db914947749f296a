// lib groupnorm: statistics of group norm and instance norm. Each (sample, group) slab is `seg`
// contiguous floats; several blocks share a long slab (enough blocks to fill the GPU even for
// N * G = 32 slabs), each reducing its chunk with 16-byte loads into double sums, then one double
// atomicAdd per block and slab; a short slab gets a block of only as many warps as it has float4s,
// and the grid strides over the slabs. The finalize kernel turns the sums into a per-(sample, channel) mean
// and scale (rstd times gamma); the normalisation is a generated elementwise kernel (bn_affine) with
// the group's epilogue fused, as for batch norm.

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

// The statistics launch for `rows` slabs of `seg` floats on `sms` SMs.
struct StitchGnLaunch {
  int threads;
  int64_t splits, chunk;
  unsigned grid;
};

static StitchGnLaunch stitch_gn_stats_launch(int64_t rows, int64_t seg, int64_t sms) {
  StitchGnLaunch l;
  // A block per slab (or per part of a long one): 512 threads for long slabs, 256 else, and for a short
  // slab only as many warps as it has float4s (GEMM + GroupNorm: slabs of 16-512 floats, where 256
  // threads would leave most of the block idle).
  l.threads = seg >= 4096 ? 512 : 256;
  const int64_t warps = ((seg + 3) / 4 + 31) / 32;  // at least 1: the caller launches only for seg >= 1
  if (warps * 32 < l.threads) l.threads = (int)(warps * 32);
  // Split each slab so that the grid holds ~4 blocks per SM, each chunk at least 8 floats per thread.
  const int64_t want = (sms * 4 + rows - 1) / rows;
  const int64_t most = (seg + l.threads * 8 - 1) / (l.threads * 8);
  l.splits = want < 1 ? 1 : (want > most ? (most < 1 ? 1 : most) : want);
  l.chunk = (seg + l.splits - 1) / l.splits;
  l.chunk = (l.chunk + 3) / 4 * 4;
  // Grid-stride over the jobs with the SMs full (2048 threads and at most 32 blocks an SM), not a block
  // per job: half a million 16-float slabs would otherwise be half a million blocks.
  const int64_t jobs = rows * l.splits;
  int64_t per_sm = 2048 / l.threads;
  if (per_sm > 32) per_sm = 32;
  const int64_t full = sms * per_sm;
  const int64_t grid = jobs < full ? jobs : full;
  l.grid = (unsigned)(grid < 1 ? 1 : grid);
  return l;
}

#ifndef STITCH_HOST_EMULATION
template <class Pro>
__global__ void stitch_gn_stats_kernel(Pro pro, double* sum, double* sumsq, int64_t rows, int64_t seg, int64_t chunk,
                                       int64_t splits, int vec) {
  __shared__ double red[32];
  for (int64_t job = blockIdx.x; job < rows * splits; job += gridDim.x) {
    const int64_t row = job / splits;
    const int64_t begin = (job % splits) * chunk;
    const int64_t end = min(begin + chunk, seg);
    double s = 0.0;
    double q = 0.0;
    stitch_gn_thread_sums(pro, row * seg, begin, end, (int)threadIdx.x, (int)blockDim.x, vec, &s, &q);
    s = stitch_block_reduce(s, StitchSumOp(), 0.0, red);
    q = stitch_block_reduce(q, StitchSumOp(), 0.0, red);
    if (threadIdx.x == 0) {
      atomicAdd(&sum[row], s);
      atomicAdd(&sumsq[row], q);
    }
  }
}

__global__ void stitch_gn_finalize_kernel(const double* sum, const double* sumsq, const float* weight, float* mean_out,
                                          float* scale_out, int64_t N, int64_t C, int64_t G, double count,
                                          float eps) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C) return;
  const int64_t c = i % C;
  const int64_t row = (i / C) * G + c / (C / G);
  const double mean = sum[row] / count;
  double var = sumsq[row] / count - mean * mean;
  if (var < 0.0) var = 0.0;
  const double w = weight != nullptr ? (double)weight[c] : 1.0;
  mean_out[i] = (float)mean;
  scale_out[i] = (float)(w / sqrt(var + (double)eps));
}

// Pro: StitchInput (the tensor) or a group's StitchPro_* functor (its elementwise prologue, e.g. a
// conv's bias and epilogue, applied on load; its launcher is generated with the group).
template <class Pro>
static int stitch_gn_stats_run(const Pro& pro, double* sum, double* sumsq, int64_t rows, int64_t seg,
                               cudaStream_t stream) {
  if (rows * seg <= 0) return (int)cudaGetLastError();
  const StitchGnLaunch l = stitch_gn_stats_launch(rows, seg, stitch_sm_count());
  const int vec = (seg % 4 == 0) && pro.vec_ok();
  stitch_gn_stats_kernel<Pro><<<l.grid, l.threads, 0, stream>>>(pro, sum, sumsq, rows, seg, l.chunk, l.splits, vec);
  return (int)cudaGetLastError();
}

extern "C" int stitch_gn_stats(const float* x, double* sum, double* sumsq, int64_t rows, int64_t seg,
                               cudaStream_t stream) {
  return stitch_gn_stats_run(StitchInput{x}, sum, sumsq, rows, seg, stream);
}

extern "C" int stitch_gn_finalize(const double* sum, const double* sumsq, const float* weight, float* mean_out,
                                  float* scale_out, int64_t N, int64_t C, int64_t G, double count, float eps,
                                  cudaStream_t stream) {
  if (N * C <= 0) return (int)cudaGetLastError();
  const int threads = 128;
  const unsigned grid = (unsigned)((N * C + threads - 1) / threads);
  stitch_gn_finalize_kernel<<<grid, threads, 0, stream>>>(sum, sumsq, weight, mean_out, scale_out, N, C, G, count,
                                                          eps);
  return (int)cudaGetLastError();
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
    // The finalize kernel's arithmetic, so both paths give the same mean and scale.
    const double mean = s / (double)seg;
    double var = q / (double)seg - mean * mean;
    if (var < 0.0) var = 0.0;
    const float mean_f = (float)mean;
    const int64_t g = row % groups;
    for (int64_t k = threadIdx.x; k < cpg; k += blockDim.x) {
      const int64_t c = g * cpg + k;
      const double w = gamma != nullptr ? (double)gamma[c] : 1.0;
      scale_c[k] = (float)(w / sqrt(var + (double)eps));
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

// Launches the one-pass kernel when the slabs qualify (*launched = 1); nothing otherwise (*launched = 0),
// and the caller takes the statistics + elementwise path.
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
#endif  // STITCH_HOST_EMULATION
