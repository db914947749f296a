// The slice of cuBLASLt our GEMM library calls (templates/gemm.cuh), for the CPU emulation
// (tools/emulation): descriptors keep their attributes, the heuristic offers one algorithm (none for an
// epilogue other than bias and relu, so the caller's fallback kernel runs), and cublasLtMatmul computes
// D = act(alpha * op(A) op(B) + beta * C + bias) column-major, batched by the layouts' strides, with
// double accumulation. It checks what cuBLASLt would reject (null operands, shapes that disagree).
#pragma once

#include <cuda_runtime.h>

enum cublasStatus_t : int {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cudaDataType : int { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2 };
enum cublasComputeType_t : int { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum cublasOperation_t : int { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasLtEpilogue_t : int {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_RELU = 2,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_RELU_BIAS = 6,
  CUBLASLT_EPILOGUE_GELU = 32,
  CUBLASLT_EPILOGUE_GELU_BIAS = 36,
};
enum cublasLtMatmulDescAttributes_t : int {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
};
enum cublasLtMatrixLayoutAttribute_t : int {
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
};
enum cublasLtMatmulPreferenceAttributes_t : int {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

enum cublasLtMatmulAlgoConfigAttributes_t : int {
  CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2,
};

struct cublasLtContext {
  int magic;
};
struct cublasLtMatmulDescOpaque_t {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const float* bias = nullptr;
};
struct cublasLtMatrixLayoutOpaque_t {
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};
struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t workspace = 0;
};
typedef cublasLtContext* cublasLtHandle_t;
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = new cublasLtContext{1};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *d = new cublasLtMatmulDescOpaque_t();
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                                     const void* buf, size_t bytes) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: memcpy(&d->ta, buf, std::min(bytes, sizeof(d->ta))); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: memcpy(&d->tb, buf, std::min(bytes, sizeof(d->tb))); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: memcpy(&d->epilogue, buf, std::min(bytes, sizeof(d->epilogue))); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: memcpy(&d->bias, buf, std::min(bytes, sizeof(d->bias))); break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
  if (type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ld < (int64_t)rows || ld < 1) return CUBLAS_STATUS_INVALID_VALUE;
  *l = new cublasLtMatrixLayoutOpaque_t{rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                       const void* buf, size_t bytes) {
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && bytes == sizeof(int32_t)) {
    memcpy(&l->batch, buf, bytes);
  } else if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && bytes == sizeof(int64_t)) {
    memcpy(&l->stride, buf, bytes);
  } else {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = new cublasLtMatmulPreferenceOpaque_t();
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                           cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                           size_t bytes) {
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) memcpy(&p->workspace, buf, std::min(bytes, sizeof(uint64_t)));
  return CUBLAS_STATUS_SUCCESS;
}

namespace stitch_emu {
// Rows and columns of op(X) for a layout.
inline void op_shape(const cublasLtMatrixLayoutOpaque_t* l, cublasOperation_t t, uint64_t* rows, uint64_t* cols) {
  *rows = t == CUBLAS_OP_N ? l->rows : l->cols;
  *cols = t == CUBLAS_OP_N ? l->cols : l->rows;
}
inline bool shapes_agree(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                         cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dl) {
  uint64_t am, ak, bk, bn;
  op_shape(a, d->ta, &am, &ak);
  op_shape(b, d->tb, &bk, &bn);
  return ak == bk && am == c->rows && bn == c->cols && c->rows == dl->rows && c->cols == dl->cols &&
         a->batch == dl->batch && b->batch == dl->batch && c->batch == dl->batch;
}
}  // namespace stitch_emu

inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                                     cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                                     cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t, int wanted,
                                                     cublasLtMatmulHeuristicResult_t* results, int* found) {
  *found = 0;
  if (!stitch_emu::shapes_agree(d, a, b, c, dl)) return CUBLAS_STATUS_INVALID_VALUE;
  const bool supported = d->epilogue == CUBLASLT_EPILOGUE_DEFAULT || d->epilogue == CUBLASLT_EPILOGUE_RELU ||
                         d->epilogue == CUBLASLT_EPILOGUE_BIAS || d->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  if (!supported || wanted < 1) return CUBLAS_STATUS_SUCCESS;
  memset(&results[0], 0, sizeof(results[0]));
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.f;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

// The emulated algorithms sum along K in one pass: no split.
inline cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                           cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                                                           size_t bytes, size_t* written) {
  if (algo == nullptr || buf == nullptr || attr != CUBLASLT_ALGO_CONFIG_SPLITK_NUM || bytes < sizeof(int32_t)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *static_cast<int32_t*>(buf) = 1;
  if (written != nullptr) *written = sizeof(int32_t);
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void* alpha_p, const void* A,
                                     cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b,
                                     const void* beta_p, const void* C, cublasLtMatrixLayout_t c, void* D,
                                     cublasLtMatrixLayout_t dl, const cublasLtMatmulAlgo_t*, void*, size_t,
                                     cudaStream_t) {
  if (h == nullptr || A == nullptr || B == nullptr || D == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (!stitch_emu::shapes_agree(d, a, b, c, dl)) return CUBLAS_STATUS_INVALID_VALUE;
  const float alpha = *static_cast<const float*>(alpha_p), beta = *static_cast<const float*>(beta_p);
  const bool bias = d->epilogue == CUBLASLT_EPILOGUE_BIAS || d->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const bool relu = d->epilogue == CUBLASLT_EPILOGUE_RELU || d->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  if (bias && d->bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const float* pa = static_cast<const float*>(A);
  const float* pb = static_cast<const float*>(B);
  const float* pc = static_cast<const float*>(C);
  float* pd = static_cast<float*>(D);
  uint64_t m, k, kk, n;
  stitch_emu::op_shape(a, d->ta, &m, &k);
  stitch_emu::op_shape(b, d->tb, &kk, &n);
  std::vector<float> out((size_t)(m * n));
  for (int32_t q = 0; q < dl->batch; ++q) {
    const float* qa = pa + q * a->stride;
    const float* qb = pb + q * b->stride;
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) {
        double acc = 0.0;
        for (uint64_t p = 0; p < k; ++p) {
          const float x = d->ta == CUBLAS_OP_N ? qa[i + p * a->ld] : qa[p + i * a->ld];
          const float y = d->tb == CUBLAS_OP_N ? qb[p + j * b->ld] : qb[j + p * b->ld];
          acc += (double)x * (double)y;
        }
        float v = alpha * (float)acc;
        if (beta != 0.f) v += beta * pc[q * c->stride + i + j * c->ld];
        if (bias) v += d->bias[i];
        if (relu) v = v < 0.f ? 0.f : v;
        out[j * m + i] = v;  // C may be D: every output is computed before any is stored
      }
    }
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t i = 0; i < m; ++i) pd[q * dl->stride + i + j * dl->ld] = out[j * m + i];
  }
  return CUBLAS_STATUS_SUCCESS;
}
