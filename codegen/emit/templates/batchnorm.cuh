// lib batchnorm: per-channel statistics of an NCHW tensor for BatchNorm (training mode uses the batch
// statistics). Sums are accumulated in double, so E[x^2] - E[x]^2 does not cancel; the normalisation
// itself is a generated elementwise kernel reading the per-channel mean and scale written here.

__global__ void stitch_bn_stats_kernel(const float* x, double* sum, double* sumsq, int64_t N, int64_t C, int64_t HW) {
  __shared__ double red[32];
  const int64_t planes = N * C;
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const int64_t c = p % C;
    const float* plane = x + p * HW;
    double s = 0.0;
    double q = 0.0;
    for (int64_t k = threadIdx.x; k < HW; k += blockDim.x) {
      const double v = (double)plane[k];
      s += v;
      q += v * v;
    }
    s = stitch_block_reduce(s, StitchSumOp(), 0.0, red);
    q = stitch_block_reduce(q, StitchSumOp(), 0.0, red);
    if (threadIdx.x == 0) {
      atomicAdd(&sum[c], s);
      atomicAdd(&sumsq[c], q);
    }
  }
}

// mode bit 1: use the batch statistics (else the running ones); bit 2: update the running statistics.
__global__ void stitch_bn_finalize_kernel(const double* sum, const double* sumsq, const float* weight, float* running_mean,
                                          float* running_var, float* mean_out, float* scale_out, int64_t C, double count,
                                          float eps, float momentum, int mode) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double mean;
  double var;
  if (mode & 1) {
    mean = sum[c] / count;
    var = sumsq[c] / count - mean * mean;
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

extern "C" int stitch_bn_stats(const float* x, double* sum, double* sumsq, int64_t N, int64_t C, int64_t HW,
                               cudaStream_t stream) {
  if (N * C <= 0) return (int)cudaGetLastError();
  const int threads = HW >= 1024 ? 512 : (HW >= 256 ? 256 : 128);
  stitch_bn_stats_kernel<<<stitch_grid(N * C, 1, 16), threads, 0, stream>>>(x, sum, sumsq, N, C, HW);
  return (int)cudaGetLastError();
}

extern "C" int stitch_bn_finalize(const double* sum, const double* sumsq, const float* weight, float* running_mean,
                                  float* running_var, float* mean_out, float* scale_out, int64_t C, double count,
                                  float eps, float momentum, int mode, cudaStream_t stream) {
  if (C <= 0) return (int)cudaGetLastError();
  const int threads = 128;
  const unsigned grid = (unsigned)((C + threads - 1) / threads);
  stitch_bn_finalize_kernel<<<grid, threads, 0, stream>>>(sum, sumsq, weight, running_mean, running_var, mean_out,
                                                          scale_out, C, count, eps, momentum, mode);
  return (int)cudaGetLastError();
}
