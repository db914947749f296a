// lib conv_dw: our direct depthwise convolution (one input channel per group, K/C outputs each), the
// conv library's algorithm STITCH_DW_ALGO (templates/conv.cuh picks its tiling and launches it).
//
// A block stages its zero-padded input tile and the channel's weights in shared memory, then each
// thread computes STITCH_DW_ROWS outputs of one column with the epilogue fused (bias first, residual,
// ReLU). Each sum starts from the bias and takes the taps row by row with one fma each, as PyTorch's
// depthwise kernel does (a zero-padded tap adds exactly nothing).
//
// The staging keeps STITCH_DW_LOADS loads in flight per thread before it stores them: a loop of one
// load and its store waits a memory latency per element, and at a 32 x 32 tile a block's staging then
// ran at a fraction of the bandwidth (level1/16, 64 x 256 x 128 x 128: 2.7 ms against 0.7 ms of
// traffic on an H100). Stage and outputs are device functions so the CPU emulation runs them phase by
// phase (tests/codegen/test_conv_dw.py).

#define STITCH_DW_ROWS 4   // output rows per thread (2-D tiles: 32 x 32 outputs, 32 x 8 threads)
#define STITCH_DW_LOADS 8  // staging loads in flight per thread

// Where block `block` works: its (image, output channel) plane, the input channel, the first output and
// the first input (padding included) of its tile.
struct StitchDwBlock {
  int64_t plane, image;
  int oc, ic, oh0, ow0, ih0, iw0;
};

__device__ __forceinline__ StitchDwBlock stitch_dw_block(int64_t block, int C, int K, int tiles_w, int tiles_h,
                                                         int tile_h, int tile_w, int SH, int SW, int PH, int PW) {
  StitchDwBlock b;
  const int tw = (int)(block % tiles_w);
  block /= tiles_w;
  const int th = (int)(block % tiles_h);
  b.plane = block / tiles_h;  // image * K + output channel
  b.oc = (int)(b.plane % K);
  b.image = b.plane / K;
  b.ic = b.oc / (K / C);
  b.oh0 = th * tile_h;
  b.ow0 = tw * tile_w;
  b.ih0 = b.oh0 * SH - PH;
  b.iw0 = b.ow0 * SW - PW;
  return b;
}

// Thread `tid` (of `nthreads`)'s share of the tile: elements tid, tid + nthreads, ... in row-major order,
// STITCH_DW_LOADS loads issued before their stores; zero outside the input. The element's (row, column)
// advances by (nthreads / tile_w_in, nthreads % tile_w_in) with one carry (lib common's stitch_advance),
// so the tile's width divides once a thread, not once an element (a division cost more instructions
// than the load it addressed).
__device__ __forceinline__ void stitch_dw_stage(const float* __restrict__ xp, float* tile, int H, int W, int ih0,
                                                int iw0, int tile_h_in, int tile_w_in, int tid, int nthreads) {
  const int n = tile_h_in * tile_w_in;
  const int dr = nthreads / tile_w_in, dc = nthreads - dr * tile_w_in;
  int r = tid / tile_w_in, c = tid - r * tile_w_in;
  for (int first = tid; first < n; first += STITCH_DW_LOADS * nthreads) {
    float v[STITCH_DW_LOADS];
#pragma unroll
    for (int k = 0; k < STITCH_DW_LOADS; ++k) {
      v[k] = 0.f;
      if (first + k * nthreads < n) {
        const int ih = ih0 + r, iw = iw0 + c;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W) v[k] = __ldg(xp + (int64_t)ih * W + iw);
      }
      stitch_advance(r, c, dr, dc, tile_w_in);
    }
#pragma unroll
    for (int k = 0; k < STITCH_DW_LOADS; ++k) {
      const int i = first + k * nthreads;
      if (i < n) tile[i] = v[k];
    }
  }
}

// One output's epilogue and store: the residual, then ReLU.
__device__ __forceinline__ void stitch_dw_store(float v, const float* __restrict__ z, float* __restrict__ y, int64_t e,
                                                int act) {
  if (z != nullptr) v += z[e];
  y[e] = (act == 1 && v < 0.f) ? 0.f : v;
}

// Thread (tx, ty)'s outputs: column ow0 + tx, the STITCH_DW_ROWS consecutive rows from oh0 + ty * STITCH_DW_ROWS,
// from the staged tile and weights; `out_plane` is the plane's first output element. A 3 x 3 window at unit
// row stride and dilation slides down the rows in registers: a row of three taps loaded once serves three
// outputs (12 shared-memory loads for 4 outputs where each output's own window takes 9), the weights held in
// registers; every other window loops over its taps.
__device__ __forceinline__ void stitch_dw_outputs(const float* tile, const float* weights, const float* __restrict__ bias,
                                                  const float* __restrict__ z, float* __restrict__ y, int oc,
                                                  int64_t out_plane, int oh0, int ow0, int OH, int OW, int KH, int KW,
                                                  int SH, int SW, int DH, int DW, int act, int tile_h, int tile_w_in,
                                                  int tx, int ty, int ny) {
  (void)ny;
  const int ow = ow0 + tx;
  if (ow >= OW) return;
  const float start = bias != nullptr ? bias[oc] : 0.f;
  const int first = ty * STITCH_DW_ROWS;  // the thread's first row within the tile
  if (KH == 3 && KW == 3 && SH == 1 && DH == 1) {
    float wr[9];
#pragma unroll
    for (int i = 0; i < 9; ++i) wr[i] = weights[i];
    const float* col = tile + first * tile_w_in + tx * SW;
    float acc[STITCH_DW_ROWS];
#pragma unroll
    for (int rr = 0; rr < STITCH_DW_ROWS; ++rr) acc[rr] = start;
    // Input row q (of the thread's STITCH_DW_ROWS + 2) feeds output row rr with weight row q - rr, in the
    // order i = 0, 1, 2 of each output's sum (the order of the loop below, and of PyTorch's kernel).
#pragma unroll
    for (int q = 0; q < STITCH_DW_ROWS + 2; ++q) {
      if (first + q >= tile_h + 2) break;  // past the staged rows (the tile's last outputs)
      const float a0 = col[q * tile_w_in], a1 = col[q * tile_w_in + DW], a2 = col[q * tile_w_in + 2 * DW];
#pragma unroll
      for (int rr = 0; rr < STITCH_DW_ROWS; ++rr) {
        const int i = q - rr;
        if (i >= 0 && i < 3) {
          acc[rr] = fmaf(a0, wr[i * 3], acc[rr]);
          acc[rr] = fmaf(a1, wr[i * 3 + 1], acc[rr]);
          acc[rr] = fmaf(a2, wr[i * 3 + 2], acc[rr]);
        }
      }
    }
#pragma unroll
    for (int rr = 0; rr < STITCH_DW_ROWS; ++rr) {
      const int local = first + rr;
      const int oh = oh0 + local;
      if (local >= tile_h || oh >= OH) break;
      stitch_dw_store(acc[rr], z, y, out_plane + (int64_t)oh * OW + ow, act);
    }
    return;
  }
#pragma unroll
  for (int rr = 0; rr < STITCH_DW_ROWS; ++rr) {
    const int local = first + rr;
    const int oh = oh0 + local;
    if (local >= tile_h || oh >= OH) break;
    const float* base = tile + local * SH * tile_w_in + tx * SW;
    float v = start;
    for (int i = 0; i < KH; ++i) {
      for (int j = 0; j < KW; ++j) v = fmaf(base[i * DH * tile_w_in + j * DW], weights[i * KW + j], v);
    }
    stitch_dw_store(v, z, y, out_plane + (int64_t)oh * OW + ow, act);
  }
}

#ifndef STITCH_HOST_EMULATION
__global__ void __launch_bounds__(256) stitch_conv_depthwise_kernel(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    const float* __restrict__ z, float* __restrict__ y, int C, int K, int H, int W, int OH, int OW, int KH, int KW,
    int SH, int SW, int PH, int PW, int DH, int DW, int act, int tiles_w, int tiles_h, int tile_h, int tile_h_in,
    int tile_w_in) {
  extern __shared__ float stitch_dw_shared[];
  float* tile = stitch_dw_shared;
  float* weights = stitch_dw_shared + tile_h_in * tile_w_in;
  const StitchDwBlock b =
      stitch_dw_block(blockIdx.x, C, K, tiles_w, tiles_h, tile_h, (int)blockDim.x, SH, SW, PH, PW);
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int nthreads = blockDim.x * blockDim.y;
  for (int i = tid; i < KH * KW; i += nthreads) weights[i] = w[(int64_t)b.oc * KH * KW + i];
  stitch_dw_stage(x + (b.image * C + b.ic) * (int64_t)H * W, tile, H, W, b.ih0, b.iw0, tile_h_in, tile_w_in, tid,
                  nthreads);
  __syncthreads();
  stitch_dw_outputs(tile, weights, bias, z, y, b.oc, b.plane * (int64_t)OH * OW, b.oh0, b.ow0, OH, OW, KH, KW, SH,
                    SW, DH, DW, act, tile_h, tile_w_in, threadIdx.x, threadIdx.y, blockDim.y);
}
#endif  // STITCH_HOST_EMULATION
