// lib gemm: fp32 GEMM through cuBLASLt (CUBLAS_COMPUTE_32F: no TF32, so results stay within 1e-4 of
// PyTorch's fp32 matmul). Column-major semantics, as cuBLAS:
//   D = act(alpha * op(A) @ op(B) + beta * C + bias)   (C and D share a layout; bias has m entries)
// act: 0 none, 1 relu. Plans (descriptors + heuristic choice) are cached per shape/alignment, so a
// call costs one cublasLtMatmul after the first. When no algorithm supports the fused epilogue the
// matmul runs without it and a small kernel of ours adds the bias / applies the relu.
// The first plain (not captured) call of a plan times up to STITCH_GEMM_CANDIDATES of cuBLASLt's
// heuristic candidates on the real operands (into a scratch output, so C and D are untouched) and keeps
// the fastest for the process; inside a CUDA graph capture, and with STITCHCUDA_GEMM_SEARCH=0, the
// heuristic's first choice stands. Split-K candidates other than that first choice are not timed: they
// sum in another order than eager's choice (docs/gemm.md).
#include <cublasLt.h>
#include <stdlib.h>

#define STITCH_GEMM_WORKSPACE (32u << 20)
#define STITCH_GEMM_PLANS 64
#define STITCH_GEMM_CANDIDATES 8
#define STITCH_CUBLAS_ERROR(status) (10000 + (int)(status))
#define STITCH_HAS_GEMM 1  // other libraries (conv.cuh) may call stitch_gemm

struct StitchGemmPlan {
  bool used;
  int64_t key[20];
  bool fused_epilogue;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulHeuristicResult_t heuristic;  // the algorithm every call runs
  cublasLtMatmulHeuristicResult_t candidates[STITCH_GEMM_CANDIDATES];
  int found;      // candidates filled, best first by cuBLASLt's estimate
  bool searched;  // timed (or not worth timing): `heuristic` is final
};

static cublasLtHandle_t stitch_lt_handle(cublasStatus_t* status) {
  static cublasLtHandle_t handle = nullptr;
  *status = CUBLAS_STATUS_SUCCESS;
  if (handle == nullptr) *status = cublasLtCreate(&handle);
  return handle;
}

// cuBLASLt's workspace, one per (device, stream): GEMMs of independent branches run at once on their
// own streams and must not share one. Allocated at a stream's first GEMM (a warm-up, never inside a
// capture); nullptr once the table is full, and the caller then allocates stream-ordered per call.
#define STITCH_GEMM_STREAMS 8
static void* stitch_lt_workspace(int device, cudaStream_t stream) {
  struct Slot {
    cudaStream_t stream;
    void* workspace;
  };
  static Slot slots[64][STITCH_GEMM_STREAMS] = {};
  if (device < 0 || device >= 64) return nullptr;
  for (Slot& slot : slots[device]) {
    if (slot.workspace != nullptr && slot.stream == stream) return slot.workspace;
  }
  for (Slot& slot : slots[device]) {
    if (slot.workspace == nullptr) {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return nullptr;  // no cudaMalloc during a capture
      }
      if (cudaMalloc(&slot.workspace, STITCH_GEMM_WORKSPACE) != cudaSuccess) {
        (void)cudaGetLastError();
        slot.workspace = nullptr;
        return nullptr;
      }
      slot.stream = stream;
      return slot.workspace;
    }
  }
  return nullptr;
}

static uint32_t stitch_alignment(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 4 && (v % a) != 0) a >>= 1;
  return a;
}

static cublasStatus_t stitch_layout(cublasLtMatrixLayout_t* layout, uint64_t rows, uint64_t cols, int64_t ld,
                                    int64_t batch, int64_t stride) {
  cublasStatus_t st = cublasLtMatrixLayoutCreate(layout, CUDA_R_32F, rows, cols, ld);
  if (st != CUBLAS_STATUS_SUCCESS || batch <= 1) return st;
  const int32_t count = (int32_t)batch;
  st = cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  return cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
}

static cublasStatus_t stitch_heuristic(cublasLtHandle_t handle, StitchGemmPlan* plan, const uint32_t align[4],
                                       int* found) {
  cublasLtMatmulPreference_t pref = nullptr;
  cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const uint64_t ws = STITCH_GEMM_WORKSPACE;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align[0], sizeof(uint32_t));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align[1], sizeof(uint32_t));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align[2], sizeof(uint32_t));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align[3], sizeof(uint32_t));
  *found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(handle, plan->op, plan->a, plan->b, plan->c, plan->c, pref, STITCH_GEMM_CANDIDATES,
                                      plan->candidates, found);
  cublasLtMatmulPreferenceDestroy(pref);
  plan->found = st == CUBLAS_STATUS_SUCCESS ? *found : 0;
  if (plan->found > 0) plan->heuristic = plan->candidates[0];
  return st;
}

static bool stitch_gemm_search_on() {
  static int on = -1;
  if (on < 0) {
    const char* v = getenv("STITCHCUDA_GEMM_SEARCH");
    on = v != nullptr && v[0] == '0' ? 0 : 1;
  }
  return on == 1;
}

// How many K slices an algorithm sums separately (1: one pass along K, as eager's usual choice).
static int32_t stitch_gemm_split_k(const cublasLtMatmulAlgo_t& algo) {
  int32_t splits = 1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits),
                                           &written) != CUBLAS_STATUS_SUCCESS) {
    return 1;
  }
  return splits;
}

// Times each candidate (one warm-up, then STITCH_GEMM_TIMED runs between two events) and keeps the
// fastest in plan->heuristic. D is written to a scratch buffer (C too when beta is 0, as then C is D), so
// the caller's tensors are untouched; a candidate that fails to launch is skipped. Synchronises the
// stream, so it is never called during a capture. Any CUDA error leaves the heuristic's first choice.
#define STITCH_GEMM_TIMED 3
static void stitch_gemm_search(cublasLtHandle_t handle, StitchGemmPlan* plan, const float* A, const float* B,
                               const float* C, const float* alpha, const float* beta, int64_t n, int64_t ldc,
                               int64_t batch, int64_t sc, void* workspace, cudaStream_t stream) {
  plan->searched = true;
  if (plan->found < 2) return;
  const int64_t span = (batch > 1 ? (batch - 1) * sc : 0) + ldc * n;  // floats D covers
  float* scratch = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaMallocAsync(reinterpret_cast<void**>(&scratch), sizeof(float) * span, stream) != cudaSuccess ||
      cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    (void)cudaGetLastError();
    if (scratch != nullptr) (void)cudaFreeAsync(scratch, stream);
    if (start != nullptr) cudaEventDestroy(start);
    return;
  }
  const float* c_in = *beta == 0.f ? scratch : C;  // C is D when beta is 0
  float best_ms = 0.f;
  int best = -1;
  for (int i = 0; i < plan->found; ++i) {
    const cublasLtMatmulHeuristicResult_t& cand = plan->candidates[i];
    if (cand.state != CUBLAS_STATUS_SUCCESS || cand.workspaceSize > STITCH_GEMM_WORKSPACE) continue;
    if (i > 0 && stitch_gemm_split_k(cand.algo) > 1) continue;
    const auto run = [&]() {
      return cublasLtMatmul(handle, plan->op, alpha, A, plan->a, B, plan->b, beta, c_in, plan->c, scratch, plan->c,
                            &cand.algo, workspace, cand.workspaceSize, stream) == CUBLAS_STATUS_SUCCESS;
    };
    bool ok = run() && cudaEventRecord(start, stream) == cudaSuccess;  // one warm-up run first
    for (int r = 0; r < STITCH_GEMM_TIMED && ok; ++r) ok = run();
    ok = ok && cudaEventRecord(stop, stream) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess;
    float ms = 0.f;
    ok = ok && cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
    if (!ok) {
      (void)cudaGetLastError();
      continue;
    }
    if (best < 0 || ms < best_ms) {
      best = i;
      best_ms = ms;
    }
  }
  if (best >= 0) plan->heuristic = plan->candidates[best];
  (void)cudaFreeAsync(scratch, stream);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  (void)cudaGetLastError();
}

static void stitch_plan_release(StitchGemmPlan* plan) {
  if (plan->op) cublasLtMatmulDescDestroy(plan->op);
  if (plan->a) cublasLtMatrixLayoutDestroy(plan->a);
  if (plan->b) cublasLtMatrixLayoutDestroy(plan->b);
  if (plan->c) cublasLtMatrixLayoutDestroy(plan->c);
  plan->op = nullptr;
  plan->a = plan->b = plan->c = nullptr;
  plan->used = false;
}

static cublasStatus_t stitch_plan_build(cublasLtHandle_t handle, StitchGemmPlan* plan, int64_t m, int64_t n, int64_t k,
                                        int64_t lda, int64_t ldb, int64_t ldc, int transa, int transb, int64_t batch,
                                        int64_t sa, int64_t sb, int64_t sc, int epilogue, const uint32_t align[4]) {
  cublasStatus_t st = cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  st = stitch_layout(&plan->a, transa ? k : m, transa ? m : k, lda, batch, sa);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  st = stitch_layout(&plan->b, transb ? n : k, transb ? k : n, ldb, batch, sb);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  st = stitch_layout(&plan->c, m, n, ldc, batch, sc);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  int found = 0;
  plan->fused_epilogue = false;
  if (epilogue != (int)CUBLASLT_EPILOGUE_DEFAULT) {
    const cublasLtEpilogue_t epi = (cublasLtEpilogue_t)epilogue;
    cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    st = stitch_heuristic(handle, plan, align, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
      plan->fused_epilogue = true;
      return st;
    }
    const cublasLtEpilogue_t plain = CUBLASLT_EPILOGUE_DEFAULT;  // fall back: our kernel does the epilogue
    cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &plain, sizeof(plain));
  }
  st = stitch_heuristic(handle, plan, align, &found);
  if (st == CUBLAS_STATUS_SUCCESS && found == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
  return st;
}

// Adds bias[i] to column-major D (m x n, ldc) and applies the activation: the epilogue fallback.
__global__ void stitch_bias_act_kernel(float* d, const float* bias, int64_t m, int64_t n, int64_t ldc, int act) {
  const int64_t total = m * n;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t i = e % m;
    const int64_t j = e / m;
    float v = d[j * ldc + i];
    if (bias != nullptr) v += bias[i];
    if (act == 1) v = v < 0.f ? 0.f : v;
    d[j * ldc + i] = v;
  }
}

// One GEMM with the given workspace (stitch_gemm below picks it): the plan for this shape, layout,
// epilogue, alignment and device (built and cached at its first call), then cublasLtMatmul.
static int stitch_gemm_with(cublasLtHandle_t handle, void* workspace, const float* A, const float* B, const float* C,
                            float* D, const float* bias, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                            int64_t ldc, int transa, int transb, int64_t batch, int64_t sa, int64_t sb, int64_t sc,
                            float alpha, float beta, int act, int device, cudaStream_t stream) {
  static StitchGemmPlan plans[STITCH_GEMM_PLANS];
  static int next_slot = 0;
  cublasStatus_t st;
  if (beta == 0.f) C = D;
  int epilogue = (int)CUBLASLT_EPILOGUE_DEFAULT;
  if (bias != nullptr) epilogue = act == 1 ? (int)CUBLASLT_EPILOGUE_RELU_BIAS : (int)CUBLASLT_EPILOGUE_BIAS;
  else if (act == 1) epilogue = (int)CUBLASLT_EPILOGUE_RELU;
  const uint32_t align[4] = {stitch_alignment(A), stitch_alignment(B), stitch_alignment(C), stitch_alignment(D)};
  const int64_t key[20] = {m, n, k, lda, ldb, ldc, transa, transb, batch, sa, sb, sc, epilogue, align[0], align[1],
                           align[2], align[3], device, 0, 0};
  StitchGemmPlan* plan = nullptr;
  for (int i = 0; i < STITCH_GEMM_PLANS && plan == nullptr; ++i) {
    if (plans[i].used) {
      bool same = true;
      for (int j = 0; j < 20 && same; ++j) same = plans[i].key[j] == key[j];
      if (same) plan = &plans[i];
    }
  }
  if (plan == nullptr) {
    plan = &plans[next_slot];
    next_slot = (next_slot + 1) % STITCH_GEMM_PLANS;
    if (plan->used) stitch_plan_release(plan);
    *plan = StitchGemmPlan();
    st = stitch_plan_build(handle, plan, m, n, k, lda, ldb, ldc, transa, transb, batch, sa, sb, sc, epilogue, align);
    if (st != CUBLAS_STATUS_SUCCESS) {
      plan->used = true;  // release what was created, keep nothing
      stitch_plan_release(plan);
      return STITCH_CUBLAS_ERROR(st);
    }
    for (int j = 0; j < 20; ++j) plan->key[j] = key[j];
    plan->used = true;
  }
  if (plan->fused_epilogue && bias != nullptr) {
    st = cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR(st);
  }
  if (!plan->searched) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) (void)cudaGetLastError();
    if (!stitch_gemm_search_on()) {
      plan->searched = true;
    } else if (capture == cudaStreamCaptureStatusNone) {
      stitch_gemm_search(handle, plan, A, B, C, &alpha, &beta, n, ldc, batch, sc, workspace, stream);
    }
  }
  st = cublasLtMatmul(handle, plan->op, &alpha, A, plan->a, B, plan->b, &beta, C, plan->c, D, plan->c,
                      &plan->heuristic.algo, workspace, plan->heuristic.workspaceSize, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR(st);
  if (!plan->fused_epilogue && (bias != nullptr || act == 1)) {
    for (int64_t bi = 0; bi < batch; ++bi) {
      stitch_bias_act_kernel<<<stitch_grid(m * n, 256, 0), 256, 0, stream>>>(D + bi * sc, bias, m, n, ldc, act);
    }
  }
  return (int)cudaGetLastError();
}

extern "C" int stitch_gemm(const float* A, const float* B, const float* C, float* D, const float* bias, int64_t m,
                           int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc, int transa, int transb,
                           int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha, float beta, int act,
                           cudaStream_t stream) {
  if (m <= 0 || n <= 0 || batch <= 0) return (int)cudaGetLastError();
  if (batch > 2147483647LL) return (int)cudaErrorInvalidValue;
  if (bias != nullptr && batch > 1) return (int)cudaErrorInvalidValue;
  cublasStatus_t st;
  cublasLtHandle_t handle = stitch_lt_handle(&st);
  if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR(st);
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return (int)cudaGetLastError();
  const auto run = [&](void* workspace) {
    return stitch_gemm_with(handle, workspace, A, B, C, D, bias, m, n, k, lda, ldb, ldc, transa, transb, batch, sa,
                            sb, sc, alpha, beta, act, device, stream);
  };
  void* workspace = stitch_lt_workspace(device, stream);
  if (workspace != nullptr) return run(workspace);
  // a stream-ordered workspace of this call's own when the table has none for it
  return stitch_with_workspace<unsigned char>(STITCH_GEMM_WORKSPACE, stream, run);
}

// Batch dims that one stride does not walk (attention's heads split from a (B, S, H * D) projection:
// (b, h) strides S * H * D and D; a batch dim broadcast with stride 0): `outer` strided-batched GEMMs,
// the operands of call o advanced by o * (oa, ob, oc) elements, where copying them contiguous first
// would cost a pass over each (the programs' _stitch_mm cuts the batch dims).
extern "C" int stitch_gemm_nested(const float* A, const float* B, const float* C, float* D, const float* bias,
                                  int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc, int transa,
                                  int transb, int64_t batch, int64_t sa, int64_t sb, int64_t sc, int64_t outer,
                                  int64_t oa, int64_t ob, int64_t oc, float alpha, float beta, int act,
                                  cudaStream_t stream) {
  for (int64_t o = 0; o < outer; ++o) {
    const float* c = C != nullptr ? C + o * oc : nullptr;
    const int err = stitch_gemm(A + o * oa, B + o * ob, c, D + o * oc, bias, m, n, k, lda, ldb, ldc, transa, transb,
                                batch, sa, sb, sc, alpha, beta, act, stream);
    if (err != 0) return err;
  }
  return (int)cudaGetLastError();
}
