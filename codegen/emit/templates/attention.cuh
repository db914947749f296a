// lib attention: fused scaled-dot-product attention forward, exact fp32 (FMA only: no TF32, no half).
//   O[b, h] = softmax(scale * Q[b, h] K[b, h]^T + mask) V[b, h];  Q [B, H, Tq, D], K [B, H, Tk, D],
//   V [B, H, Tk, Dv], O [B, H, Tq, Dv]. Mask: none, or causal (key j of query i masked when
//   j > i + Tk - Tq: torch.tril's / is_causal's for Tq == Tk), and/or a tensor mask M [B, H, Tq, Tk]
//   (any strides; 0 for a broadcast dim) compared with a number: where `M OP rhs` holds, the scaled score
//   becomes `fill` (MinGPT's `att.masked_fill(bias[:, :, :T, :T] == 0, -inf)`), or added to the scaled
//   score (SDPA's float `attn_mask`), or a bool mask (one byte an element) that keeps or masks; a row
//   whose keys are all masked with -inf gives NaN, as PyTorch's softmax of an all -inf row does. Every operand is read (O written) through its own
//   (b, h, t) element strides, the last dim contiguous: MinGPT's head-split views of a (B, T, H * D)
//   projection, and the head merge of y.transpose(1, 2).contiguous(), need no copy.
// Tiling: a block of 128 threads owns 64 query rows (their Q tile stays in shared memory) and walks key
// tiles of 32 (K and V tiles in shared memory; 16-byte loads when every row is 16-byte aligned, else
// floats). Thread (ty, tx) = (tid / 8, tid % 8) holds rows 4ty..4ty+3: a 4x4 register tile of scores
// (keys tx + 8k) and a 4 x HD/8 tile of the output (columns 4tx + 32c..+3). A row's 8 threads are 8 lanes
// of one warp: the row max is 3 xor-shuffles a tile and the row sum stays per thread until the end (all 8
// rescale by the same factor). Online softmax: scores never leave the SM; P reaches the P V product
// through a shared slab (P^T, 4 rows a float4) that only the owning warp reads, so __syncwarp suffices.
// Causal: key tiles past the block's last row's diagonal are never loaded, and the per-score mask runs
// only on tiles that cross a diagonal or the end of the keys. A tensor mask is read per tile before K and
// V (16 floats a thread, L2-resident when broadcast over heads); with a -inf fill, a tile the mask
// removes for every row of the block adds exactly nothing and is skipped (one __syncthreads_or), so a
// lower-triangular mask costs what `causal` does without the kernel knowing the mask's values.
// Why 64 x 32 and 128 threads: at HD = 128 a thread holds 64 + 16 accumulators and ~20 operand registers,
// so 3 blocks (12 warps) fit an SM's registers, and 3 x 74 KiB of shared memory (Q 64x132, K 32x132,
// V 32x128, P^T 32x68 floats) fit its 228 KiB; 64-key tiles would leave one block per SM. The padding
// (4 floats a row) keeps every 16-byte shared access conflict-free. Loads and math are not overlapped
// within a block (no cp.async: the CPU emulation runs this file); the SM's other blocks overlap them.
// Head dims up to 128: one instantiation per HD = 32, 64, 128 (by max(D, Dv)); larger ones return
// cudaErrorNotSupported, for the caller's fallback.

#define STITCH_ATTN_BM 64  // query rows a block
#define STITCH_ATTN_BN 32  // keys a tile
#define STITCH_ATTN_THREADS 128
// Comparisons of a tensor mask with its number (codegen/emit/attention.py passes these codes).
#define STITCH_ATTN_EQ 1
#define STITCH_ATTN_NE 2
#define STITCH_ATTN_LT 3
#define STITCH_ATTN_LE 4
#define STITCH_ATTN_GT 5
#define STITCH_ATTN_GE 6
#define STITCH_ATTN_ADD 7  // not a comparison: the mask is added to the scaled score (SDPA's float attn_mask)
#define STITCH_ATTN_KEEP 8  // a bool (byte) mask, True keeps the key (SDPA's bool attn_mask)
#define STITCH_ATTN_DROP 9  // a bool (byte) mask, True masks the key (nn.MultiheadAttention's bool attn_mask)

struct StitchAttnArgs {
  const float* q;
  const float* k;
  const float* v;
  float* o;
  int64_t H, Tq, Tk, D, Dv;
  int64_t qs_b, qs_h, qs_t, ks_b, ks_h, ks_t, vs_b, vs_h, vs_t, os_b, os_h, os_t;
  int64_t bh;  // B * H
  int64_t q_tiles;
  float scale;
  int causal;
  const void* mask;  // null: no tensor mask; floats, or bytes for KEEP / DROP
  int64_t ms_b, ms_h, ms_i, ms_j;
  int mcmp;  // EQ..GE: where `mask OP mrhs` holds, the score becomes mfill; ADD: score + mask; KEEP / DROP: bytes
  float mrhs, mfill;
  int mskip;  // mfill is -inf: tiles masked for every row are skipped
  int vec_q, vec_k, vec_v, vec_o;  // 16-byte accesses to the operand's rows
};

// Shared floats of the HD instantiation: Q and K at row stride HD + 4, V at HD, P^T at BM + 4.
__host__ __device__ constexpr int stitch_attn_smem_floats(int hd) {
  return (STITCH_ATTN_BM + STITCH_ATTN_BN) * (hd + 4) + STITCH_ATTN_BN * hd + STITCH_ATTN_BN * (STITCH_ATTN_BM + 4);
}

// Rows [0, rows) of a ROWS-row tile, `width` (<= HD) floats each, from `src` (row stride `ld`) into `dst`
// (row stride SS); rows from `rows` on become zeros, so no garbage reaches a product (0 * NaN).
// Columns from `width` on are left alone.
template <int ROWS, int HD, int SS>
__device__ __forceinline__ void stitch_attn_stage(float* dst, const float* __restrict__ src, int64_t ld, int rows,
                                                  int width, bool vec) {
  if (vec) {  // width % 4 == 0, src and ld 16-byte aligned
    constexpr int C4 = HD / 4;
#pragma unroll
    for (int it = 0; it < ROWS * C4 / STITCH_ATTN_THREADS; ++it) {
      const int idx = it * STITCH_ATTN_THREADS + (int)threadIdx.x;
      const int r = idx / C4, c = (idx % C4) * 4;
      if (c < width) {
        float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
        if (r < rows) val = __ldg(reinterpret_cast<const float4*>(src + r * ld + c));
        *reinterpret_cast<float4*>(dst + r * SS + c) = val;
      }
    }
  } else {
#pragma unroll 4
    for (int it = 0; it < ROWS * HD / STITCH_ATTN_THREADS; ++it) {
      const int idx = it * STITCH_ATTN_THREADS + (int)threadIdx.x;
      const int r = idx / HD, c = idx % HD;
      if (c < width) dst[r * SS + c] = r < rows ? __ldg(src + r * ld + c) : 0.f;
    }
  }
}

__device__ __forceinline__ bool stitch_attn_compare(float m, int op, float rhs) {
  switch (op) {
    case STITCH_ATTN_EQ: return m == rhs;
    case STITCH_ATTN_NE: return m != rhs;
    case STITCH_ATTN_LT: return m < rhs;
    case STITCH_ATTN_LE: return m <= rhs;
    case STITCH_ATTN_GT: return m > rhs;
    default: return m >= rhs;
  }
}

__device__ __forceinline__ float4 stitch_attn_lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }

template <int HD>
__global__ void __launch_bounds__(STITCH_ATTN_THREADS, HD == 128 ? 3 : 4) stitch_attention_kernel(StitchAttnArgs a) {
  constexpr int BM = STITCH_ATTN_BM, BN = STITCH_ATTN_BN;
  constexpr int QS = HD + 4, PS = BM + 4, CV = HD / 32;
  extern __shared__ __align__(16) float stitch_attn_smem[];
  float* Qs = stitch_attn_smem;  // [BM][QS], then K right after it: [BN][QS]
  float* Ks = Qs + BM * QS;
  float* Vs = Ks + BN * QS;  // [BN][HD]
  float* Ps = Vs + BN * HD;  // [BN][PS]: P^T
  const int tid = (int)threadIdx.x, tx = tid & 7, ty = tid >> 3;

  // Query tiles of every head, the last (the heaviest when causal) first.
  const int64_t qt = a.q_tiles - 1 - (int64_t)blockIdx.x / a.bh;
  const int64_t bh = (int64_t)blockIdx.x % a.bh;
  const int64_t b = bh / a.H, h = bh - b * a.H;
  const int64_t q0 = qt * BM;
  const int qrows = (int)(a.Tq - q0 < BM ? a.Tq - q0 : BM);
  const int D = (int)a.D, Dv = (int)a.Dv, Dr = (D + 3) & ~3;  // D rounded up to 4

  // A head dim off a multiple of 4: the score loop reads Q and K up to Dr, so their padding is zero.
  if (Dr != D) {
    for (int idx = tid; idx < (BM + BN) * 4; idx += STITCH_ATTN_THREADS) {
      const int c = D + (idx & 3);
      if (c < Dr) Qs[(idx >> 2) * QS + c] = 0.f;  // rows BM.. are K's
    }
  }
  stitch_attn_stage<BM, HD, QS>(Qs, a.q + b * a.qs_b + h * a.qs_h + q0 * a.qs_t, a.qs_t, qrows, D, a.vec_q != 0);

  float acc[4][CV][4];
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int c = 0; c < CV; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][c][e] = 0.f;
    }
  }

  const int64_t diag = a.Tk - a.Tq;  // causal: row i sees keys j <= i + diag
  int64_t kend = a.Tk;
  if (a.causal && q0 + qrows + diag < kend) kend = q0 + qrows + diag;  // the block's last row's last key + 1
  const float* kb = a.k + b * a.ks_b + h * a.ks_h;
  const float* vb = a.v + b * a.vs_b + h * a.vs_h;
  const int64_t moff = b * a.ms_b + h * a.ms_h + q0 * a.ms_i;
  const bool bytes = a.mcmp >= STITCH_ATTN_KEEP;
  const float* mb = a.mask == nullptr || bytes ? nullptr : static_cast<const float*>(a.mask) + moff;
  const unsigned char* mbb = a.mask == nullptr || !bytes ? nullptr : static_cast<const unsigned char*>(a.mask) + moff;
  const int row0 = 4 * ty;

  for (int64_t k0 = 0; k0 < kend; k0 += BN) {
    const int krows = (int)(a.Tk - k0 < BN ? a.Tk - k0 : BN);
    // The tensor mask of this thread's 16 scores: bit 4i + kk set where (row0 + i, key tx + 8kk) is filled.
    unsigned filled = 0u;
    if ((mb != nullptr && a.mcmp != STITCH_ATTN_ADD) || mbb != nullptr) {
      bool live = false;  // a real score of this thread that the mask keeps
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          const int64_t j = k0 + tx + 8 * kk;
          if (row0 + i < qrows && j < a.Tk) {
            const int64_t at = (row0 + i) * a.ms_i + j * a.ms_j;
            const bool fill = mbb != nullptr ? (__ldg(mbb + at) != 0) == (a.mcmp == STITCH_ATTN_DROP)
                                             : stitch_attn_compare(__ldg(mb + at), a.mcmp, a.mrhs);
            filled |= (unsigned)fill << (4 * i + kk);
            live = live || !fill;
          }
        }
      }
      // Uniform across the block; also the barrier before the previous tile's K, V and P are overwritten.
      if (a.mskip && !__syncthreads_or(live)) continue;
    }
    __syncthreads();  // every read of the previous tile's K, V and P is done
    stitch_attn_stage<BN, HD, QS>(Ks, kb + k0 * a.ks_t, a.ks_t, krows, D, a.vec_k != 0);
    stitch_attn_stage<BN, HD, HD>(Vs, vb + k0 * a.vs_t, a.vs_t, krows, Dv, a.vec_v != 0);
    __syncthreads();

    // S = Q K^T for rows row0..row0+3, keys tx + 8kk.
    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) s[i][kk] = 0.f;
    }
#pragma unroll 1  // unrolled further, HD = 128 spills at 168 registers
    for (int d = 0; d < Dr; d += 4) {
      float4 qf[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) qf[i] = stitch_attn_lds4(Qs + (row0 + i) * QS + d);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const float4 kf = stitch_attn_lds4(Ks + (tx + 8 * kk) * QS + d);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          s[i][kk] = fmaf(qf[i].x, kf.x, s[i][kk]);
          s[i][kk] = fmaf(qf[i].y, kf.y, s[i][kk]);
          s[i][kk] = fmaf(qf[i].z, kf.z, s[i][kk]);
          s[i][kk] = fmaf(qf[i].w, kf.w, s[i][kk]);
        }
      }
    }

    // Scale and mask; the tile's keys past Tk, or past the block's first row's diagonal, need the mask.
    const bool edge = k0 + BN > a.Tk || (a.causal && k0 + BN - 1 > q0 + diag);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        float x = s[i][kk] * a.scale;
        const int64_t j = k0 + tx + 8 * kk;
        if ((filled >> (4 * i + kk)) & 1u) x = a.mfill;
        // An added mask is read here, not before the tile (16 more live registers through Q K^T would
        // spill at HD = 128); nothing is skipped for it.
        if (a.mcmp == STITCH_ATTN_ADD && row0 + i < qrows && j < a.Tk) x += __ldg(mb + (row0 + i) * a.ms_i + j * a.ms_j);
        if (edge) {
          if (j >= a.Tk || (a.causal && j > q0 + row0 + i + diag)) x = -INFINITY;
        }
        s[i][kk] = x;
      }
    }

    // Online softmax: the row's new max over its 8 lanes, the old sums and outputs rescaled.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mt = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3]));
#pragma unroll
      for (int off = 1; off < 8; off <<= 1) mt = fmaxf(mt, __shfl_xor_sync(STITCH_FULL_MASK, mt, off));
      const float mn = fmaxf(m[i], mt);
      const float mu = mn == -INFINITY ? 0.f : mn;  // every key so far masked: p = 0, nothing to rescale
      const float alpha = expf(m[i] - mu);
      m[i] = mn;
      float sum = 0.f;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        s[i][kk] = expf(s[i][kk] - mu);
        sum += s[i][kk];
      }
      l[i] = l[i] * alpha + sum;
#pragma unroll
      for (int c = 0; c < CV; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][c][e] *= alpha;
      }
    }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      *reinterpret_cast<float4*>(Ps + (tx + 8 * kk) * PS + row0) = make_float4(s[0][kk], s[1][kk], s[2][kk], s[3][kk]);
    }
    __syncwarp();  // P^T's columns row0.. are this warp's own

    // O += P V: key j's probabilities of the 4 rows (one float4) times V's row j, 4 columns a chunk.
#pragma unroll 4
    for (int j = 0; j < BN; ++j) {
      const float4 p = stitch_attn_lds4(Ps + j * PS + row0);
      const float pr[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
      for (int c = 0; c < CV; ++c) {
        if (32 * c < Dv) {
          const float4 vv = stitch_attn_lds4(Vs + j * HD + 4 * tx + 32 * c);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            acc[i][c][0] = fmaf(pr[i], vv.x, acc[i][c][0]);
            acc[i][c][1] = fmaf(pr[i], vv.y, acc[i][c][1]);
            acc[i][c][2] = fmaf(pr[i], vv.z, acc[i][c][2]);
            acc[i][c][3] = fmaf(pr[i], vv.w, acc[i][c][3]);
          }
        }
      }
    }
  }

  // The row sums over the 8 lanes; an all-masked row has l = 0 and acc = 0, so 0 / 0 = NaN as PyTorch's.
  float* ob = a.o + b * a.os_b + h * a.os_h;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float sum = l[i];
#pragma unroll
    for (int off = 1; off < 8; off <<= 1) sum += __shfl_xor_sync(STITCH_FULL_MASK, sum, off);
    const int r = row0 + i;
    if (r >= qrows) continue;
    float* orow = ob + (q0 + r) * a.os_t;
#pragma unroll
    for (int c = 0; c < CV; ++c) {
      const int col = 4 * tx + 32 * c;
      float out[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) out[e] = acc[i][c][e] / sum;
      if (a.vec_o) {
        if (col < Dv) stitch_st4(orow + col, out);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (col + e < Dv) orow[col + e] = out[e];
        }
      }
    }
  }
}

template <int HD>
static int stitch_attention_launch(const StitchAttnArgs& a, unsigned grid, cudaStream_t stream) {
  constexpr size_t smem = (size_t)stitch_attn_smem_floats(HD) * sizeof(float);
  static size_t granted[64] = {0};  // the opt-in (HD = 128 needs 74 KiB), per device, once
  if (!stitch_grant_smem(stitch_attention_kernel<HD>, smem, granted)) return (int)cudaErrorInvalidValue;
  stitch_attention_kernel<HD><<<grid, STITCH_ATTN_THREADS, smem, stream>>>(a);
  return (int)cudaGetLastError();
}

// Strides in elements, (b, h, t) per operand, (b, h, i, j) for the mask; each operand's last dim is
// contiguous (the mask's need not be). `compare` 0: no tensor mask, else STITCH_ATTN_EQ..DROP. Returns 0, a
// CUDA error, or cudaErrorNotSupported (nothing launched) for a head dim above 128 or no keys (Tk == 0).
extern "C" int stitch_attention_masked(const float* q, const float* k, const float* v, float* o, int64_t B,
                                       int64_t H, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv, int64_t q_sb,
                                       int64_t q_sh, int64_t q_st, int64_t k_sb, int64_t k_sh, int64_t k_st,
                                       int64_t v_sb, int64_t v_sh, int64_t v_st, int64_t o_sb, int64_t o_sh,
                                       int64_t o_st, float scale, int causal, const void* mask, int64_t m_sb,
                                       int64_t m_sh, int64_t m_si, int64_t m_sj, int compare, float rhs, float fill,
                                       cudaStream_t stream) {
  if (D < 0 || Dv < 0 || B < 0 || H < 0 || Tq < 0 || Tk < 0) return (int)cudaErrorInvalidValue;
  if (compare < 0 || compare > STITCH_ATTN_DROP || (compare != 0 && mask == nullptr)) return (int)cudaErrorInvalidValue;
  if (D > 128 || Dv > 128 || Tk == 0) return (int)cudaErrorNotSupported;
  if (B == 0 || H == 0 || Tq == 0 || Dv == 0) return (int)cudaGetLastError();  // nothing to write
  StitchAttnArgs a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = o;
  a.H = H;
  a.Tq = Tq;
  a.Tk = Tk;
  a.D = D;
  a.Dv = Dv;
  a.qs_b = q_sb, a.qs_h = q_sh, a.qs_t = q_st;
  a.ks_b = k_sb, a.ks_h = k_sh, a.ks_t = k_st;
  a.vs_b = v_sb, a.vs_h = v_sh, a.vs_t = v_st;
  a.os_b = o_sb, a.os_h = o_sh, a.os_t = o_st;
  a.bh = B * H;
  a.q_tiles = (Tq + STITCH_ATTN_BM - 1) / STITCH_ATTN_BM;
  a.scale = scale;
  a.causal = causal != 0;
  a.mask = compare != 0 ? mask : nullptr;
  a.ms_b = m_sb, a.ms_h = m_sh, a.ms_i = m_si, a.ms_j = m_sj;
  a.mcmp = compare;
  a.mrhs = rhs;
  a.mfill = fill;
  a.mskip = compare != STITCH_ATTN_ADD && fill == -INFINITY;
  a.vec_q = D % 4 == 0 && stitch_aligned16(q) && ((q_sb | q_sh | q_st) & 3) == 0;
  a.vec_k = D % 4 == 0 && stitch_aligned16(k) && ((k_sb | k_sh | k_st) & 3) == 0;
  a.vec_v = Dv % 4 == 0 && stitch_aligned16(v) && ((v_sb | v_sh | v_st) & 3) == 0;
  a.vec_o = Dv % 4 == 0 && stitch_aligned16(o) && ((o_sb | o_sh | o_st) & 3) == 0;
  const int64_t blocks = a.q_tiles * a.bh;
  if (blocks > 2147483647LL) return (int)cudaErrorInvalidValue;
  const int64_t hd = D > Dv ? D : Dv;
  if (hd <= 32) return stitch_attention_launch<32>(a, (unsigned)blocks, stream);
  if (hd <= 64) return stitch_attention_launch<64>(a, (unsigned)blocks, stream);
  return stitch_attention_launch<128>(a, (unsigned)blocks, stream);
}
