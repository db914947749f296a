// lib rnn: one layer and direction of an LSTM / GRU / Elman RNN, host loop over time steps here.
//   1. G = X @ W_ih^T + b_ih for every time step at once (one cuBLASLt GEMM, bias in its epilogue);
//   2. per step, `fused` (the default): one kernel that computes h_prev @ W_hh^T + b_hh for a block's
//      hidden units (all their gates) and applies the cell to them (stitch_rnn_step_kernel); else
//      Hg = h_prev @ W_hh^T + b_hh (one small cuBLASLt GEMM), then one cell kernel that adds G's row
//      block for that step, applies the gates and writes h straight into the output sequence.
// h_prev is read in place from the output sequence (batch stride = the sequence's row stride), so no
// state copies run inside the loop; the LSTM cell state lives in c_n's slice. Gate order is
// PyTorch's: LSTM (i, f, g, o), GRU (r, z, n); GRU's n gate uses r * (W_hn h + b_hn) as PyTorch does.
// mode: 0 LSTM, 1 GRU, 2 RNN tanh, 3 RNN relu. Uses stitch_gemm (lib gemm: fp32, no TF32).

__device__ __forceinline__ float stitch_sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

// Gates a hidden unit has (rows of W_hh per unit) in each mode.
__host__ __device__ constexpr int stitch_rnn_gates(int mode) { return mode == 0 ? 4 : (mode == 1 ? 3 : 1); }

// The cell of one (batch entry, hidden unit) from its gate sums `h[q]` (h_prev @ W_hh^T + b_hh of gate q)
// and its row of G (`x`, gate q at x[q * hidden]); `c` the LSTM cell state, `prev` h_prev (GRU).
template <int MODE>
__device__ __forceinline__ float stitch_rnn_cell(const float* x, int64_t hidden, const float (&h)[4], float* c,
                                                 float prev) {
  if (MODE == 0) {
    const float i = stitch_sigmoid(x[0] + h[0]);
    const float f = stitch_sigmoid(x[hidden] + h[1]);
    const float g = tanhf(x[2 * hidden] + h[2]);
    const float o = stitch_sigmoid(x[3 * hidden] + h[3]);
    const float cn = f * *c + i * g;
    *c = cn;
    return o * tanhf(cn);
  }
  if (MODE == 1) {
    const float r = stitch_sigmoid(x[0] + h[0]);
    const float z = stitch_sigmoid(x[hidden] + h[1]);
    const float n = tanhf(x[2 * hidden] + r * h[2]);
    return (1.f - z) * n + z * prev;
  }
  const float v = x[0] + h[0];
  return MODE == 2 ? tanhf(v) : fmaxf(v, 0.f);
}

// The unfused path's cell kernel: a thread per (batch entry, hidden unit), its gate sums read from Hg.
template <int MODE>
__global__ void stitch_rnn_cell_kernel(const float* __restrict__ gx, int64_t gx_bstride,
                                       const float* __restrict__ gh, const float* hprev, int64_t hp_bstride,
                                       float* __restrict__ c, float* hout, int64_t out_bstride, int64_t batch,
                                       int64_t hidden) {
  constexpr int G = stitch_rnn_gates(MODE);
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= batch * hidden) return;
  const int64_t b = idx / hidden, j = idx - b * hidden;
  float h[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int q = 0; q < G; ++q) h[q] = gh[(b * G + q) * hidden + j];
  const float prev = MODE == 1 ? hprev[b * hp_bstride + j] : 0.f;
  hout[b * out_bstride + j] =
      stitch_rnn_cell<MODE>(gx + b * gx_bstride + j, hidden, h, MODE == 0 ? c + idx : nullptr, prev);
}

// One time step in one kernel (the small GEMM and the cell fused). A warp owns one hidden unit, all G
// of its gate rows of W_hh: its lanes form 4 groups of 8, group g takes batch entries 4g..4g+3 of a chunk
// of 16 and its 8 lanes stride over the row (V floats a load), so a weight loaded once serves 4 batch
// entries and an h_prev value G rows. Sums meet over the group's 8 lanes (3 shuffles), and lane i of
// the group applies the cell to entry 4g + i. Per step this is one launch where a cuBLASLt GEMM and a
// cell kernel were two or more, and the work spreads over `hidden` warps where the small GEMM's tiles
// left most SMs idle (an LSTM of batch 16 and hidden 512 ran 0.87x of cuDNN's on an H100 that way).
#define STITCH_RNN_WARPS 4  // warps (hidden units) a block
template <int V>
__device__ __forceinline__ void stitch_rnn_load(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = p[e];
  }
}

template <int MODE, int V>
__global__ void stitch_rnn_step_kernel(const float* __restrict__ w_hh, const float* __restrict__ b_hh,
                                       const float* __restrict__ gx, int64_t gx_bstride, const float* hprev,
                                       int64_t hp_bstride, float* c, float* hout, int64_t out_bstride, int64_t batch,
                                       int64_t hidden) {
  constexpr int G = stitch_rnn_gates(MODE);
  const int lane = threadIdx.x & 31, grp = lane >> 3, kl = lane & 7;
  const int64_t j = (int64_t)blockIdx.x * STITCH_RNN_WARPS + (threadIdx.x >> 5);
  if (j >= hidden) return;  // a whole warp; the kernel has no block barrier
  for (int64_t b0 = 0; b0 < batch; b0 += 16) {
    const int64_t first = b0 + 4 * grp;  // this group's first batch entry
    float acc[G][4];
#pragma unroll
    for (int q = 0; q < G; ++q) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[q][i] = 0.f;
    }
    for (int64_t k = (int64_t)kl * V; k < hidden; k += 8 * V) {
      float w[G][V];
#pragma unroll
      for (int q = 0; q < G; ++q) stitch_rnn_load<V>(w_hh + ((int64_t)q * hidden + j) * hidden + k, w[q]);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (first + i < batch) {
          float h[V];
          stitch_rnn_load<V>(hprev + (first + i) * hp_bstride + k, h);
#pragma unroll
          for (int q = 0; q < G; ++q) {
#pragma unroll
            for (int e = 0; e < V; ++e) acc[q][i] = fmaf(w[q][e], h[e], acc[q][i]);
          }
        }
      }
    }
#pragma unroll
    for (int q = 0; q < G; ++q) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int m = 4; m > 0; m >>= 1) acc[q][i] += __shfl_xor_sync(STITCH_FULL_MASK, acc[q][i], m);
      }
    }
    const int64_t row = first + kl;
    if (kl < 4 && row < batch) {
      float h[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int q = 0; q < G; ++q) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (i == kl) h[q] = acc[q][i];
        }
        if (b_hh != nullptr) h[q] += b_hh[q * hidden + j];
      }
      const float prev = MODE == 1 ? hprev[row * hp_bstride + j] : 0.f;
      hout[row * out_bstride + j] =
          stitch_rnn_cell<MODE>(gx + row * gx_bstride + j, hidden, h, MODE == 0 ? c + row * hidden + j : nullptr, prev);
    }
  }
}

// One time step of mode MODE: the fused kernel, or (`fused` 0) Hg = h_prev @ W_hh^T + b_hh into `g_h` by
// cuBLASLt and the cell kernel.
template <int MODE>
static int stitch_rnn_step(int fused, const float* w_hh, const float* b_hh, float* g_h, const float* gx, int64_t gx_b,
                           const float* hprev, int64_t hp_b, float* c, float* hout, int64_t out_b, int64_t batch,
                           int64_t hidden, cudaStream_t stream) {
  if (fused != 0) {
    const unsigned blocks = (unsigned)((hidden + STITCH_RNN_WARPS - 1) / STITCH_RNN_WARPS);
    const int threads = 32 * STITCH_RNN_WARPS;
    if (hidden % 4 == 0 && hp_b % 4 == 0 && stitch_aligned16(w_hh) && stitch_aligned16(hprev)) {
      stitch_rnn_step_kernel<MODE, 4><<<blocks, threads, 0, stream>>>(w_hh, b_hh, gx, gx_b, hprev, hp_b, c, hout,
                                                                      out_b, batch, hidden);
    } else {
      stitch_rnn_step_kernel<MODE, 1><<<blocks, threads, 0, stream>>>(w_hh, b_hh, gx, gx_b, hprev, hp_b, c, hout,
                                                                      out_b, batch, hidden);
    }
    return 0;
  }
  const int64_t gates = stitch_rnn_gates(MODE) * hidden;
  const int err = stitch_gemm(w_hh, hprev, nullptr, g_h, b_hh, gates, batch, hidden, hidden, hp_b, gates, 1, 0, 1, 0,
                              0, 0, 1.f, 0.f, 0, stream);
  if (err != 0) return err;
  const int threads = 256;
  const unsigned blocks = (unsigned)((batch * hidden + threads - 1) / threads);
  stitch_rnn_cell_kernel<MODE><<<blocks, threads, 0, stream>>>(gx, gx_b, g_h, hprev, hp_b, c, hout, out_b, batch,
                                                               hidden);
  return 0;
}

// Workspace: seq * batch * gates * hidden floats for G, then batch * gates * hidden for Hg.
extern "C" int stitch_rnn_layer(const float* x, int64_t x_ld, const float* w_ih, const float* w_hh,
                                const float* b_ih, const float* b_hh, const float* h0, const float* c0,
                                float* out, float* hn, float* cn, float* ws, int64_t seq, int64_t batch,
                                int64_t in_size, int64_t hidden, int64_t out_ld, int64_t dir_offset, int mode,
                                int reverse, int batch_first, int fused, cudaStream_t stream) {
  if (seq <= 0 || batch <= 0) return (int)cudaGetLastError();
  if (mode < 0 || mode > 3) return (int)cudaErrorInvalidValue;
  const int64_t gates = stitch_rnn_gates(mode) * hidden;
  float* g_all = ws;
  float* g_h = ws + seq * batch * gates;
  // Rows of X (and of G) are in memory order: (b, t) -> b * seq + t when batch_first, else t * batch + b.
  int err = stitch_gemm(w_ih, x, nullptr, g_all, b_ih, gates, seq * batch, in_size, in_size, x_ld, gates, 1, 0, 1,
                        0, 0, 0, 1.f, 0.f, 0, stream);
  if (err != 0) return err;
  if (mode == 0) {
    cudaError_t st = cudaMemcpyAsync(cn, c0, sizeof(float) * batch * hidden, cudaMemcpyDeviceToDevice, stream);
    if (st != cudaSuccess) return (int)st;
  }
  const int64_t row_t = batch_first ? 1 : batch;  // row distance between time steps
  const int64_t row_b = batch_first ? seq : 1;    // row distance between batch entries
  int64_t last = 0;
  for (int64_t s = 0; s < seq; ++s) {
    const int64_t t = reverse ? seq - 1 - s : s;
    const float* hprev = h0;
    int64_t hp_bstride = hidden;
    if (s > 0) {
      const int64_t tp = reverse ? t + 1 : t - 1;
      hprev = out + tp * row_t * out_ld + dir_offset;
      hp_bstride = row_b * out_ld;
    }
    const float* gx = g_all + t * row_t * gates;
    float* hout = out + t * row_t * out_ld + dir_offset;
    const int64_t gx_b = row_b * gates, out_b = row_b * out_ld;
    if (mode == 0) {
      err = stitch_rnn_step<0>(fused, w_hh, b_hh, g_h, gx, gx_b, hprev, hp_bstride, cn, hout, out_b, batch, hidden,
                               stream);
    } else if (mode == 1) {
      err = stitch_rnn_step<1>(fused, w_hh, b_hh, g_h, gx, gx_b, hprev, hp_bstride, cn, hout, out_b, batch, hidden,
                               stream);
    } else if (mode == 2) {
      err = stitch_rnn_step<2>(fused, w_hh, b_hh, g_h, gx, gx_b, hprev, hp_bstride, cn, hout, out_b, batch, hidden,
                               stream);
    } else {
      err = stitch_rnn_step<3>(fused, w_hh, b_hh, g_h, gx, gx_b, hprev, hp_bstride, cn, hout, out_b, batch, hidden,
                               stream);
    }
    if (err != 0) return err;
    last = t;
  }
  // h_n: the last step's h, one (batch, hidden) block out of the strided sequence.
  cudaError_t st = cudaMemcpy2DAsync(hn, sizeof(float) * hidden, out + last * row_t * out_ld + dir_offset,
                                     sizeof(float) * row_b * out_ld, sizeof(float) * hidden, batch,
                                     cudaMemcpyDeviceToDevice, stream);
  if (st != cudaSuccess) return (int)st;
  return (int)cudaGetLastError();
}
