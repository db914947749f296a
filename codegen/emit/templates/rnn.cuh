// lib rnn: one layer and direction of an LSTM / GRU / Elman RNN, host loop over time steps here.
//   1. G = X @ W_ih^T + b_ih for every time step at once (one cuBLASLt GEMM, bias in its epilogue);
//   2. per step: Hg = h_prev @ W_hh^T + b_hh (one small GEMM), then one fused cell kernel that adds
//      G's row block for that step, applies the gates and writes h straight into the output sequence.
// h_prev is read in place from the output sequence (batch stride = the sequence's row stride), so no
// state copies run inside the loop; the LSTM cell state lives in c_n's slice. Gate order is
// PyTorch's: LSTM (i, f, g, o), GRU (r, z, n); GRU's n gate uses r * (W_hn h + b_hn) as PyTorch does.
// mode: 0 LSTM, 1 GRU, 2 RNN tanh, 3 RNN relu. Uses stitch_gemm (lib gemm: fp32, no TF32).

__device__ __forceinline__ float stitch_sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

template <int MODE>
__global__ void stitch_rnn_cell_kernel(const float* __restrict__ gx, int64_t gx_bstride,
                                       const float* __restrict__ gh, const float* hprev, int64_t hp_bstride,
                                       float* __restrict__ c, float* hout, int64_t out_bstride, int64_t batch,
                                       int64_t hidden) {
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= batch * hidden) return;
  const int64_t b = idx / hidden, j = idx - b * hidden;
  const float* x = gx + b * gx_bstride;
  if (MODE == 0) {
    const float* h = gh + b * 4 * hidden;
    const float i = stitch_sigmoid(x[j] + h[j]);
    const float f = stitch_sigmoid(x[hidden + j] + h[hidden + j]);
    const float g = tanhf(x[2 * hidden + j] + h[2 * hidden + j]);
    const float o = stitch_sigmoid(x[3 * hidden + j] + h[3 * hidden + j]);
    const float cn = f * c[idx] + i * g;
    c[idx] = cn;
    hout[b * out_bstride + j] = o * tanhf(cn);
  } else if (MODE == 1) {
    const float* h = gh + b * 3 * hidden;
    const float r = stitch_sigmoid(x[j] + h[j]);
    const float z = stitch_sigmoid(x[hidden + j] + h[hidden + j]);
    const float n = tanhf(x[2 * hidden + j] + r * h[2 * hidden + j]);
    const float prev = hprev[b * hp_bstride + j];
    hout[b * out_bstride + j] = (1.f - z) * n + z * prev;
  } else {
    const float v = x[j] + gh[b * hidden + j];
    hout[b * out_bstride + j] = MODE == 2 ? tanhf(v) : fmaxf(v, 0.f);
  }
}

static int stitch_rnn_gates(int mode) { return mode == 0 ? 4 : (mode == 1 ? 3 : 1); }

// Workspace: seq * batch * gates * hidden floats for G, then batch * gates * hidden for Hg.
extern "C" int stitch_rnn_layer(const float* x, int64_t x_ld, const float* w_ih, const float* w_hh,
                                const float* b_ih, const float* b_hh, const float* h0, const float* c0,
                                float* out, float* hn, float* cn, float* ws, int64_t seq, int64_t batch,
                                int64_t in_size, int64_t hidden, int64_t out_ld, int64_t dir_offset, int mode,
                                int reverse, int batch_first, cudaStream_t stream) {
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
  const int threads = 256;
  const int64_t blocks = (batch * hidden + threads - 1) / threads;
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
    err = stitch_gemm(w_hh, hprev, nullptr, g_h, b_hh, gates, batch, hidden, hidden, hp_bstride, gates, 1, 0, 1, 0, 0,
                      0, 1.f, 0.f, 0, stream);
    if (err != 0) return err;
    const float* gx = g_all + t * row_t * gates;
    float* hout = out + t * row_t * out_ld + dir_offset;
    const int64_t gx_b = row_b * gates, out_b = row_b * out_ld;
    if (mode == 0) {
      stitch_rnn_cell_kernel<0><<<blocks, threads, 0, stream>>>(gx, gx_b, g_h, hprev, hp_bstride, cn, hout, out_b,
                                                                batch, hidden);
    } else if (mode == 1) {
      stitch_rnn_cell_kernel<1><<<blocks, threads, 0, stream>>>(gx, gx_b, g_h, hprev, hp_bstride, cn, hout, out_b,
                                                                batch, hidden);
    } else if (mode == 2) {
      stitch_rnn_cell_kernel<2><<<blocks, threads, 0, stream>>>(gx, gx_b, g_h, hprev, hp_bstride, cn, hout, out_b,
                                                                batch, hidden);
    } else {
      stitch_rnn_cell_kernel<3><<<blocks, threads, 0, stream>>>(gx, gx_b, g_h, hprev, hp_bstride, cn, hout, out_b,
                                                                batch, hidden);
    }
    last = t;
  }
  // h_n: the last step's h, one (batch, hidden) block out of the strided sequence.
  cudaError_t st = cudaMemcpy2DAsync(hn, sizeof(float) * hidden, out + last * row_t * out_ld + dir_offset,
                                     sizeof(float) * row_b * out_ld, sizeof(float) * hidden, batch,
                                     cudaMemcpyDeviceToDevice, stream);
  if (st != cudaSuccess) return (int)st;
  return (int)cudaGetLastError();
}
