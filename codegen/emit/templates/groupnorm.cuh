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
#endif  // STITCH_HOST_EMULATION
