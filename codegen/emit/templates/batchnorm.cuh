// lib batchnorm: per-channel statistics of an NCHW tensor for BatchNorm (training mode uses the batch
// statistics), turned into the per-channel mean and scale that the generated elementwise kernel
// normalises with. Sums are accumulated in double, so E[x^2] - E[x]^2 does not cancel.
//
// Each channel's N x HW elements, in (n, k) order, are cut into `slices` ranges of `span` elements
// (a multiple of 4 when HW is, so a float4 never straddles two planes). Block (c, s) sums range s of
// channel c and writes its two partial sums: no atomics, nothing to zero first. One thread per channel
// then folds its slices in order, so the result is the same on every run.

// Thread t's share (of `nthreads`) of elements [lo, hi) of channel c: its sum and sum of squares.
__device__ __forceinline__ void stitch_bn_thread_sums(const float* __restrict__ x, int64_t C, int64_t HW, int64_t c,
                                                      int64_t lo, int64_t hi, int t, int nthreads, bool vec,
                                                      double* sum, double* sumsq) {
  double s = 0.0;
  double q = 0.0;
  if (HW < 32) {  // short planes (BatchNorm1d: HW == 1): threads over the (n, k) index, not within a plane
    for (int64_t i = lo + t; i < hi; i += nthreads) {
      const int64_t n = i / HW;
      const double v = x[(n * C + c) * HW + (i - n * HW)];
      s += v;
      q += v * v;
    }
    *sum = s;
    *sumsq = q;
    return;
  }
  for (int64_t n = lo / HW; n * HW < hi; ++n) {  // the planes the range touches
    const float* plane = x + (n * C + c) * HW;
    const int64_t k0 = lo > n * HW ? lo - n * HW : 0;
    const int64_t k1 = hi < (n + 1) * HW ? hi - n * HW : HW;
    if (vec) {  // k0 and k1 are multiples of 4
#pragma unroll 4
      for (int64_t k = k0 + 4LL * t; k < k1; k += 4LL * nthreads) {
        const float4 v = *reinterpret_cast<const float4*>(plane + k);
        const double a = v.x, b = v.y, d = v.z, e = v.w;
        s += (a + b) + (d + e);
        q += (a * a + b * b) + (d * d + e * e);
      }
    } else {
#pragma unroll 4
      for (int64_t k = k0 + t; k < k1; k += nthreads) {
        const double v = plane[k];
        s += v;
        q += v * v;
      }
    }
  }
  *sum = s;
  *sumsq = q;
}

#ifndef STITCH_HOST_EMULATION  // tests/codegen/test_batchnorm.py runs the slicing on the CPU
__global__ void stitch_bn_partial_kernel(const float* __restrict__ x, double* __restrict__ partial, int64_t N,
                                         int64_t C, int64_t HW, int64_t span, bool vec) {
  __shared__ double red[32];
  const int64_t c = blockIdx.x;
  const int64_t slice = blockIdx.y;
  const int64_t total = N * HW;
  const int64_t lo = slice * span;
  const int64_t hi = lo + span < total ? lo + span : total;
  double s = 0.0;
  double q = 0.0;
  stitch_bn_thread_sums(x, C, HW, c, lo, hi, threadIdx.x, blockDim.x, vec, &s, &q);
  s = stitch_block_reduce(s, StitchSumOp(), 0.0, red);
  q = stitch_block_reduce(q, StitchSumOp(), 0.0, red);
  if (threadIdx.x == 0) {
    partial[2 * (c * gridDim.y + slice)] = s;
    partial[2 * (c * gridDim.y + slice) + 1] = q;
  }
}

// mode bit 1: use the batch statistics (else the running ones); bit 2: update the running statistics.
// `tracked` (the module's num_batches_tracked, or null) is incremented once: PyTorch's `add_(1)` on it
// would be a kernel of its own per batch norm (a MobileNetV2 forward launched 52 of them).
__global__ void stitch_bn_finalize_kernel(const double* partial, int64_t slices, const float* weight,
                                          float* running_mean, float* running_var, int64_t* tracked,
                                          float* mean_out, float* scale_out, int64_t C, double count, float eps,
                                          float momentum, int mode) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  if (c == 0 && tracked != nullptr) *tracked += 1;
  double mean;
  double var;
  if (mode & 1) {
    double sum = 0.0;
    double sumsq = 0.0;
    for (int64_t s = 0; s < slices; ++s) {
      sum += partial[2 * (c * slices + s)];
      sumsq += partial[2 * (c * slices + s) + 1];
    }
    mean = sum / count;
    var = sumsq / count - mean * mean;
    if (var < 0.0) var = 0.0;
  } else {
    mean = (double)running_mean[c];
    var = (double)running_var[c];
  }
  const double invstd = 1.0 / sqrt(var + (double)eps);
  const double w = weight != nullptr ? (double)weight[c] : 1.0;
  mean_out[c] = (float)mean;
  scale_out[c] = (float)(w * invstd);
  if ((mode & 2) && running_mean != nullptr && running_var != nullptr) {
    const double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
    running_mean[c] = (float)((1.0 - (double)momentum) * (double)running_mean[c] + (double)momentum * mean);
    running_var[c] = (float)((1.0 - (double)momentum) * (double)running_var[c] + (double)momentum * unbiased);
  }
}
#endif

// Slices per channel: enough blocks for about four per SM, each range at least 2048 elements.
static inline int64_t stitch_bn_slices(int64_t N, int64_t C, int64_t HW, int sms, bool vec, int64_t* span) {
  const int64_t total = N * HW;
  int64_t slices = (4LL * sms + C - 1) / C;
  const int64_t most = total / 2048 > 1 ? total / 2048 : 1;
  if (slices > most) slices = most;
  if (slices > 65535) slices = 65535;
  if (slices < 1) slices = 1;
  int64_t s = (total + slices - 1) / slices;
  if (vec) s = (s + 3) & ~3LL;
  *span = s > 0 ? s : 1;
  return (total + *span - 1) / *span;
}

#ifndef STITCH_HOST_EMULATION
// The whole statistics step: partial sums (training) and the per-channel mean and scale, with the
// running statistics updated as `mode` says. `threads` is the partial kernel's launch knob (0: by
// the range length).
extern "C" int stitch_bn_stats(const float* x, const float* weight, float* running_mean, float* running_var,
                               int64_t* tracked, float* mean_out, float* scale_out, int64_t N, int64_t C,
                               int64_t HW, float eps, float momentum, int mode, int threads, cudaStream_t stream) {
  if (C <= 0) return (int)cudaGetLastError();
  const double count = (double)N * (double)HW;
  // partial: two doubles per (channel, slice) in training mode; the finalize kernel reads none otherwise
  const auto finalize = [&](const double* partial, int64_t slices) {
    const int per_block = 128;
    const unsigned grid = (unsigned)((C + per_block - 1) / per_block);
    stitch_bn_finalize_kernel<<<grid, per_block, 0, stream>>>(partial, slices, weight, running_mean, running_var,
                                                              tracked, mean_out, scale_out, C, count, eps, momentum,
                                                              mode);
    return (int)cudaGetLastError();
  };
  if (!(mode & 1)) return finalize(nullptr, 0);
  if (N * HW <= 0) return (int)cudaErrorInvalidValue;  // PyTorch raises too: no values to average
  const bool vec = HW % 4 == 0 && stitch_aligned16(x);
  int64_t span = 0;
  const int64_t slices = stitch_bn_slices(N, C, HW, stitch_sm_count(), vec, &span);
  const StitchLaunch c = stitch_launch_or(StitchLaunch{threads, 1}, span >= 8192 ? 512 : 256, 1);
  return stitch_with_workspace<double>(2 * C * slices, stream, [&](double* partial) {
    stitch_bn_partial_kernel<<<dim3((unsigned)C, (unsigned)slices), c.threads, 0, stream>>>(x, partial, N, C, HW,
                                                                                          span, vec);
    const int err = (int)cudaGetLastError();
    return err != 0 ? err : finalize(partial, slices);
  });
}
#endif
