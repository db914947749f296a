// lib elementwise: drivers (one float4 per thread, grid-stride only past the grid limit) for a generated functor F with
//   struct In;                                  // the operands of four elements
//   void scalar(int64_t e) const;               // element e
//   void load4(int64_t e, In& in) const;        // read elements e..e+3's operands (e a multiple of 4,
//   void store4(int64_t e, const In& in) const; //   full operands 16-byte aligned), compute and write them
//   void vec4(int64_t e) const;                 // load4 then store4
template <class F>
__global__ void stitch_ew_vec_kernel(F f, int64_t n4) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) f.vec4(i * 4);
}

// U float4 per thread per step, every chunk's loads issued before the first store: U times the bytes
// in flight a thread has for bandwidth-bound chains. (Calling vec4 U times would not do it: the loads
// cannot move above a store through pointers that may alias, so each chunk waited for the last.)
template <class F, int U>
__global__ void stitch_ew_vecu_kernel(F f, int64_t n4) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += U * stride) {
    typename F::In in[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (i + u * stride < n4) f.load4((i + u * stride) * 4, in[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (i + u * stride < n4) f.store4((i + u * stride) * 4, in[u]);
    }
  }
}

template <class F>
__global__ void stitch_ew_scalar_kernel(F f, int64_t start, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) f.scalar(e);
}

// Vector path over the multiple-of-4 prefix when every full operand is aligned, scalar tail after it.
// `unroll` (1 or 2 float4 per thread per step) and `threads` (per block) are launch knobs the program
// reads from its STITCH_LAUNCH table (docs/autotuning.md); a threads value that is not a multiple of
// 32 in [32, 1024] falls back to 256.
template <class F>
static int stitch_ew_launch(const F& f, int64_t n, bool vec_ok, int unroll, int threads, cudaStream_t stream) {
  if (n <= 0) return (int)cudaGetLastError();
  if (threads < 32 || threads > 1024 || threads % 32 != 0) threads = 256;
  int64_t start = 0;
  if (vec_ok) {
    const int64_t n4 = n / 4;
    if (n4 > 0) {
      if (unroll > 1) {
        stitch_ew_vecu_kernel<F, 2><<<stitch_grid_all((n4 + 1) / 2, threads), threads, 0, stream>>>(f, n4);
      } else {
        stitch_ew_vec_kernel<F><<<stitch_grid_all(n4, threads), threads, 0, stream>>>(f, n4);
      }
    }
    start = n4 * 4;
  }
  if (n - start > 0) {
    stitch_ew_scalar_kernel<F><<<stitch_grid(n - start, threads, 0), threads, 0, stream>>>(f, start, n);
  }
  return (int)cudaGetLastError();
}
