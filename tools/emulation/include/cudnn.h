// The slice of cuDNN our convolution library calls (templates/conv.cuh), for the CPU emulation
// (tools/emulation): descriptors keep their shapes, the heuristics offer two exact algorithms per
// direction (FMA math, no workspace), and the convolutions (forward, bias + residual + activation
// forward, backward data for transposed convolutions) run as direct loops in double over N-d NCHW
// tensors with groups, padding, stride and dilation. The graph API (templates/conv_engine.cuh) only
// compiles: creating a backend descriptor answers CUDNN_STATUS_NOT_SUPPORTED, so engines never join.
#pragma once

#include <cuda_runtime.h>

enum cudnnStatus_t : int {
  CUDNN_STATUS_SUCCESS = 0,
  CUDNN_STATUS_NOT_INITIALIZED = 1,
  CUDNN_STATUS_ALLOC_FAILED = 2,
  CUDNN_STATUS_BAD_PARAM = 3,
  CUDNN_STATUS_INTERNAL_ERROR = 4,
  CUDNN_STATUS_EXECUTION_FAILED = 8,
  CUDNN_STATUS_NOT_SUPPORTED = 9,
};
enum cudnnDataType_t : int { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_DOUBLE = 1, CUDNN_DATA_HALF = 2 };
enum cudnnTensorFormat_t : int { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 };
enum cudnnConvolutionMode_t : int { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 };
enum cudnnMathType_t : int {
  CUDNN_DEFAULT_MATH = 0,
  CUDNN_TENSOR_OP_MATH = 1,
  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
  CUDNN_FMA_MATH = 3,
};
enum cudnnActivationMode_t : int {
  CUDNN_ACTIVATION_SIGMOID = 0,
  CUDNN_ACTIVATION_RELU = 1,
  CUDNN_ACTIVATION_TANH = 2,
  CUDNN_ACTIVATION_CLIPPED_RELU = 3,
  CUDNN_ACTIVATION_ELU = 4,
  CUDNN_ACTIVATION_IDENTITY = 5,
};
enum cudnnNanPropagation_t : int { CUDNN_NOT_PROPAGATE_NAN = 0, CUDNN_PROPAGATE_NAN = 1 };
enum cudnnDeterminism_t : int { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 };
enum cudnnConvolutionFwdAlgo_t : int {
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
  CUDNN_CONVOLUTION_FWD_ALGO_GEMM = 2,
  CUDNN_CONVOLUTION_FWD_ALGO_DIRECT = 3,
  CUDNN_CONVOLUTION_FWD_ALGO_FFT = 4,
  CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING = 5,
  CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD = 6,
  CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED = 7,
};
enum cudnnConvolutionBwdDataAlgo_t : int {
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT = 2,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING = 3,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD = 4,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED = 5,
};
// cuDNN's two perf records differ only in the algorithm's type.
template <class Algo>
struct StitchEmuAlgoPerf {
  Algo algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
};
typedef StitchEmuAlgoPerf<cudnnConvolutionFwdAlgo_t> cudnnConvolutionFwdAlgoPerf_t;
typedef StitchEmuAlgoPerf<cudnnConvolutionBwdDataAlgo_t> cudnnConvolutionBwdDataAlgoPerf_t;

struct cudnnContext {
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  int nb = 0;
  int dims[8] = {0};
  int strides[8] = {0};
};
struct cudnnFilterStruct {
  int nb = 0;
  int dims[8] = {0};
};
struct cudnnConvolutionStruct {
  int sd = 0;
  int pad[3] = {0}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1};
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
};
struct cudnnActivationStruct {
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_IDENTITY;
};
typedef cudnnContext* cudnnHandle_t;
typedef cudnnTensorStruct* cudnnTensorDescriptor_t;
typedef cudnnFilterStruct* cudnnFilterDescriptor_t;
typedef cudnnConvolutionStruct* cudnnConvolutionDescriptor_t;
typedef cudnnActivationStruct* cudnnActivationDescriptor_t;

inline size_t cudnnGetVersion() { return 90000; }
inline const char* cudnnGetErrorString(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS ? "success" : "emulated cuDNN error"; }
inline cudnnStatus_t cudnnCreate(cudnnHandle_t* h) {
  *h = new cudnnContext();
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
  delete h;
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
  h->stream = s;
  return CUDNN_STATUS_SUCCESS;
}
#define STITCH_EMU_CUDNN_DESCRIPTOR(Kind, Type)                                       \
  inline cudnnStatus_t cudnnCreate##Kind##Descriptor(Type* d) {                       \
    *d = new std::remove_pointer_t<Type>();                                           \
    return CUDNN_STATUS_SUCCESS;                                                      \
  }                                                                                   \
  inline cudnnStatus_t cudnnDestroy##Kind##Descriptor(Type d) {                       \
    delete d;                                                                         \
    return CUDNN_STATUS_SUCCESS;                                                      \
  }
STITCH_EMU_CUDNN_DESCRIPTOR(Tensor, cudnnTensorDescriptor_t)
STITCH_EMU_CUDNN_DESCRIPTOR(Filter, cudnnFilterDescriptor_t)
STITCH_EMU_CUDNN_DESCRIPTOR(Convolution, cudnnConvolutionDescriptor_t)
STITCH_EMU_CUDNN_DESCRIPTOR(Activation, cudnnActivationDescriptor_t)
#undef STITCH_EMU_CUDNN_DESCRIPTOR

inline cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t type, int nb, const int* dims,
                                                const int* strides) {
  if (type != CUDNN_DATA_FLOAT || nb < 3 || nb > 8) return CUDNN_STATUS_NOT_SUPPORTED;
  d->nb = nb;
  for (int i = 0; i < nb; ++i) {
    if (dims[i] <= 0) return CUDNN_STATUS_BAD_PARAM;
    d->dims[i] = dims[i];
    d->strides[i] = strides[i];
  }
  for (int i = 0; i < nb; ++i) {  // packed NCHW only: what our library describes
    int expect = 1;
    for (int j = i + 1; j < nb; ++j) expect *= dims[j];
    if (strides[i] != expect) return CUDNN_STATUS_NOT_SUPPORTED;
  }
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                                cudnnTensorFormat_t format, int nb, const int* dims) {
  if (type != CUDNN_DATA_FLOAT || format != CUDNN_TENSOR_NCHW || nb < 3 || nb > 8) return CUDNN_STATUS_NOT_SUPPORTED;
  d->nb = nb;
  for (int i = 0; i < nb; ++i) {
    if (dims[i] <= 0) return CUDNN_STATUS_BAD_PARAM;
    d->dims[i] = dims[i];
  }
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t d, int sd, const int* pad,
                                                     const int* stride, const int* dil, cudnnConvolutionMode_t mode,
                                                     cudnnDataType_t type) {
  if (sd < 1 || sd > 3 || type != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
  d->sd = sd;
  d->mode = mode;
  for (int i = 0; i < sd; ++i) {
    if (pad[i] < 0 || stride[i] < 1 || dil[i] < 1) return CUDNN_STATUS_BAD_PARAM;
    d->pad[i] = pad[i];
    d->stride[i] = stride[i];
    d->dil[i] = dil[i];
  }
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
  if (groups < 1) return CUDNN_STATUS_BAD_PARAM;
  d->groups = groups;
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
  d->math = math;
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, cudnnActivationMode_t mode,
                                                  cudnnNanPropagation_t, double) {
  if (mode != CUDNN_ACTIVATION_RELU && mode != CUDNN_ACTIVATION_IDENTITY) return CUDNN_STATUS_NOT_SUPPORTED;
  d->mode = mode;
  return CUDNN_STATUS_SUCCESS;
}

namespace stitch_emu {
// The forward problem's output extent along spatial dim i.
inline int conv_out(const cudnnConvolutionStruct* c, int in, int ker, int i) {
  return (in + 2 * c->pad[i] - c->dil[i] * (ker - 1) - 1) / c->stride[i] + 1;
}
// Whether x (input), w (filter) and y (output) describe one forward problem of `c`.
inline bool conv_agrees(const cudnnConvolutionStruct* c, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                        const cudnnTensorStruct* y) {
  const int nb = c->sd + 2;
  if (x->nb != nb || w->nb != nb || y->nb != nb) return false;
  if (x->dims[0] != y->dims[0] || w->dims[0] != y->dims[1] || w->dims[1] * c->groups != x->dims[1]) return false;
  if (y->dims[1] % c->groups != 0) return false;
  for (int i = 0; i < c->sd; ++i)
    if (conv_out(c, x->dims[2 + i], w->dims[2 + i], i) != y->dims[2 + i]) return false;
  return true;
}
// Calls visit(y_index, x_index, w_index) for every product term of the forward problem (x -> y).
template <class Visit>
inline void conv_terms(const cudnnConvolutionStruct* c, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                       const cudnnTensorStruct* y, Visit visit) {
  const int sd = c->sd;
  int in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, ker[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, st[3] = {1, 1, 1}, dl[3] = {1, 1, 1};
  for (int i = 0; i < sd; ++i) {  // right-aligned into three dims
    const int j = 3 - sd + i;
    in[j] = x->dims[2 + i];
    out[j] = y->dims[2 + i];
    ker[j] = w->dims[2 + i];
    pad[j] = c->pad[i];
    st[j] = c->stride[i];
    dl[j] = c->dil[i];
  }
  const int64_t n = x->dims[0], cin = x->dims[1], k = y->dims[1], g = c->groups, cg = cin / g, kg = k / g;
  const int64_t in_size = (int64_t)in[0] * in[1] * in[2], out_size = (int64_t)out[0] * out[1] * out[2];
  const int64_t ker_size = (int64_t)ker[0] * ker[1] * ker[2];
  for (int64_t b = 0; b < n; ++b)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            const int64_t yi = (b * k + kk) * out_size + (o0 * out[1] + o1) * out[2] + o2;
            for (int64_t cl = 0; cl < cg; ++cl) {
              const int64_t ch = (kk / kg) * cg + cl;
              for (int64_t q0 = 0; q0 < ker[0]; ++q0) {
                const int64_t i0 = o0 * st[0] - pad[0] + q0 * dl[0];
                if (i0 < 0 || i0 >= in[0]) continue;
                for (int64_t q1 = 0; q1 < ker[1]; ++q1) {
                  const int64_t i1 = o1 * st[1] - pad[1] + q1 * dl[1];
                  if (i1 < 0 || i1 >= in[1]) continue;
                  for (int64_t q2 = 0; q2 < ker[2]; ++q2) {
                    const int64_t i2 = o2 * st[2] - pad[2] + q2 * dl[2];
                    if (i2 < 0 || i2 >= in[2]) continue;
                    const int64_t xi = (b * cin + ch) * in_size + (i0 * in[1] + i1) * in[2] + i2;
                    const int64_t wi = (kk * cg + cl) * ker_size + (q0 * ker[1] + q1) * ker[2] + q2;
                    visit(yi, xi, wi);
                  }
                }
              }
            }
          }
}
inline int64_t tensor_numel(const cudnnTensorStruct* t) {
  int64_t v = 1;
  for (int i = 0; i < t->nb; ++i) v *= t->dims[i];
  return v;
}
// conv(x, w) of the forward problem into a fresh double buffer shaped as y.
inline std::vector<double> conv_forward(const cudnnConvolutionStruct* c, const cudnnTensorStruct* xd, const float* x,
                                        const cudnnFilterStruct* wd, const float* w, const cudnnTensorStruct* yd) {
  std::vector<double> acc((size_t)tensor_numel(yd), 0.0);
  conv_terms(c, xd, wd, yd, [&](int64_t yi, int64_t xi, int64_t wi) { acc[yi] += (double)x[xi] * (double)w[wi]; });
  return acc;
}
}  // namespace stitch_emu

inline cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t x,
                                                           cudnnFilterDescriptor_t w, int nb, int* out) {
  if (nb != c->sd + 2 || x->nb != nb || w->nb != nb || w->dims[1] * c->groups != x->dims[1]) return CUDNN_STATUS_BAD_PARAM;
  out[0] = x->dims[0];
  out[1] = w->dims[0];
  for (int i = 0; i < c->sd; ++i) {
    out[2 + i] = stitch_emu::conv_out(c, x->dims[2 + i], w->dims[2 + i], i);
    if (out[2 + i] <= 0) return CUDNN_STATUS_BAD_PARAM;
  }
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t, int* count) {
  *count = 8;
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t, int* count) {
  *count = 6;
  return CUDNN_STATUS_SUCCESS;
}
template <class Perf, class Algo>
inline void stitch_emu_offer(Perf* perf, int wanted, int* returned, Algo first, Algo second, cudnnMathType_t math) {
  *returned = 0;
  const Algo algos[2] = {first, second};
  for (int i = 0; i < 2 && i < wanted; ++i) {
    memset(&perf[i], 0, sizeof(perf[i]));
    perf[i].algo = algos[i];
    perf[i].status = CUDNN_STATUS_SUCCESS;
    perf[i].determinism = CUDNN_DETERMINISTIC;
    perf[i].mathType = math == CUDNN_TENSOR_OP_MATH ? CUDNN_DEFAULT_MATH : math;
    *returned = i + 1;
  }
}
inline cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                            cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                                                            cudnnTensorDescriptor_t y, int wanted, int* returned,
                                                            cudnnConvolutionFwdAlgoPerf_t* perf) {
  if (!stitch_emu::conv_agrees(c, x, w, y)) return CUDNN_STATUS_BAD_PARAM;
  stitch_emu_offer(perf, wanted, returned, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, c->math);
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, cudnnFilterDescriptor_t w,
                                                                 cudnnTensorDescriptor_t dy,
                                                                 cudnnConvolutionDescriptor_t c,
                                                                 cudnnTensorDescriptor_t dx, int wanted, int* returned,
                                                                 cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  if (!stitch_emu::conv_agrees(c, dx, w, dy)) return CUDNN_STATUS_BAD_PARAM;
  stitch_emu_offer(perf, wanted, returned, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                   c->math);
  return CUDNN_STATUS_SUCCESS;
}
inline cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                             cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                                                             cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
                                                             size_t* bytes) {
  if (!stitch_emu::conv_agrees(c, x, w, y)) return CUDNN_STATUS_BAD_PARAM;
  *bytes = 0;
  return algo <= CUDNN_CONVOLUTION_FWD_ALGO_DIRECT ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
}
inline cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t, cudnnFilterDescriptor_t w,
                                                                  cudnnTensorDescriptor_t dy,
                                                                  cudnnConvolutionDescriptor_t c,
                                                                  cudnnTensorDescriptor_t dx,
                                                                  cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
  if (!stitch_emu::conv_agrees(c, dx, w, dy)) return CUDNN_STATUS_BAD_PARAM;
  *bytes = 0;
  return algo <= CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
}
inline cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t, const void* alpha, cudnnTensorDescriptor_t xd,
                                             const void* x, cudnnFilterDescriptor_t wd, const void* w,
                                             cudnnConvolutionDescriptor_t c, cudnnConvolutionFwdAlgo_t algo, void*,
                                             size_t, const void* beta, cudnnTensorDescriptor_t yd, void* y) {
  if (!stitch_emu::conv_agrees(c, xd, wd, yd) || algo > CUDNN_CONVOLUTION_FWD_ALGO_DIRECT) return CUDNN_STATUS_BAD_PARAM;
  const std::vector<double> acc = stitch_emu::conv_forward(c, xd, static_cast<const float*>(x), wd,
                                                           static_cast<const float*>(w), yd);
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  float* out = static_cast<float*>(y);
  for (size_t i = 0; i < acc.size(); ++i) out[i] = a * (float)acc[i] + (b != 0.f ? b * out[i] : 0.f);
  return CUDNN_STATUS_SUCCESS;
}
// y = act(alpha1 * conv(x, w) + alpha2 * z + bias); cuDNN allows the identity only with PRECOMP_GEMM.
inline cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t, const void* alpha1, cudnnTensorDescriptor_t xd, const void* x, cudnnFilterDescriptor_t wd,
    const void* w, cudnnConvolutionDescriptor_t c, cudnnConvolutionFwdAlgo_t algo, void*, size_t, const void* alpha2,
    cudnnTensorDescriptor_t zd, const void* z, cudnnTensorDescriptor_t bd, const void* bias,
    cudnnActivationDescriptor_t act, cudnnTensorDescriptor_t yd, void* y) {
  if (!stitch_emu::conv_agrees(c, xd, wd, yd) || zd->nb != yd->nb || bd->dims[1] != yd->dims[1])
    return CUDNN_STATUS_BAD_PARAM;
  if (act->mode == CUDNN_ACTIVATION_IDENTITY && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
    return CUDNN_STATUS_NOT_SUPPORTED;
  const std::vector<double> acc = stitch_emu::conv_forward(c, xd, static_cast<const float*>(x), wd,
                                                           static_cast<const float*>(w), yd);
  const float a1 = *static_cast<const float*>(alpha1), a2 = *static_cast<const float*>(alpha2);
  const float* zz = static_cast<const float*>(z);
  const float* bb = static_cast<const float*>(bias);
  float* out = static_cast<float*>(y);
  const int64_t k = yd->dims[1], inner = stitch_emu::tensor_numel(yd) / ((int64_t)yd->dims[0] * k);
  for (size_t i = 0; i < acc.size(); ++i) {
    float v = a1 * (float)acc[i] + (a2 != 0.f ? a2 * zz[i] : 0.f) + bb[((int64_t)i / inner) % k];
    if (act->mode == CUDNN_ACTIVATION_RELU) v = v < 0.f ? 0.f : v;
    out[i] = v;
  }
  return CUDNN_STATUS_SUCCESS;
}
// dx = alpha * conv_transpose(dy, w) + beta * dx, w the forward problem's (dx -> dy) filter.
inline cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t, const void* alpha, cudnnFilterDescriptor_t wd,
                                                  const void* w, cudnnTensorDescriptor_t dyd, const void* dy,
                                                  cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdDataAlgo_t algo,
                                                  void*, size_t, const void* beta, cudnnTensorDescriptor_t dxd,
                                                  void* dx) {
  if (!stitch_emu::conv_agrees(c, dxd, wd, dyd) || algo > CUDNN_CONVOLUTION_BWD_DATA_ALGO_1)
    return CUDNN_STATUS_BAD_PARAM;
  std::vector<double> acc((size_t)stitch_emu::tensor_numel(dxd), 0.0);
  const float* g = static_cast<const float*>(dy);
  const float* f = static_cast<const float*>(w);
  stitch_emu::conv_terms(c, dxd, wd, dyd,
                         [&](int64_t yi, int64_t xi, int64_t wi) { acc[xi] += (double)g[yi] * (double)f[wi]; });
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  float* out = static_cast<float*>(dx);
  for (size_t i = 0; i < acc.size(); ++i) out[i] = a * (float)acc[i] + (b != 0.f ? b * out[i] : 0.f);
  return CUDNN_STATUS_SUCCESS;
}

// ---- the graph (backend) API: names only; every descriptor creation is refused ----------------------
typedef void* cudnnBackendDescriptor_t;
enum cudnnBackendAttributeName_t : int {
  CUDNN_ATTR_CONVOLUTION_COMP_TYPE = 0, CUDNN_ATTR_CONVOLUTION_CONV_MODE = 1, CUDNN_ATTR_CONVOLUTION_DILATIONS = 2,
  CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES = 3, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS = 4,
  CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS = 5, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS = 6, CUDNN_ATTR_ENGINECFG_ENGINE = 7,
  CUDNN_ATTR_ENGINEHEUR_MODE = 8, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH = 9, CUDNN_ATTR_ENGINEHEUR_RESULTS = 10,
  CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE = 11, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE = 12,
  CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 13, CUDNN_ATTR_EXECUTION_PLAN_HANDLE = 14,
  CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 15, CUDNN_ATTR_OPERATIONGRAPH_HANDLE = 16,
  CUDNN_ATTR_OPERATIONGRAPH_OPS = 17, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA = 18,
  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA = 19, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC = 20,
  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX = 21, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY = 22,
  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W = 23, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA = 24,
  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA = 25, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC = 26,
  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W = 27, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X = 28,
  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y = 29, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT = 30,
  CUDNN_ATTR_TENSOR_DATA_TYPE = 31, CUDNN_ATTR_TENSOR_DIMENSIONS = 32, CUDNN_ATTR_TENSOR_STRIDES = 33,
  CUDNN_ATTR_TENSOR_UNIQUE_ID = 34, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS = 35,
  CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS = 36, CUDNN_ATTR_VARIANT_PACK_WORKSPACE = 37,
};
enum cudnnBackendDescriptorType_t : int {
  CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR = 0, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR = 1,
  CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR = 2, CUDNN_BACKEND_ENGINE_DESCRIPTOR = 3,
  CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR = 4, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR = 5,
  CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR = 6,
  CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR = 7, CUDNN_BACKEND_TENSOR_DESCRIPTOR = 8,
  CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR = 9,
};
enum cudnnBackendAttributeType_t : int {
  CUDNN_TYPE_BACKEND_DESCRIPTOR = 0, CUDNN_TYPE_BEHAVIOR_NOTE = 1, CUDNN_TYPE_CONVOLUTION_MODE = 2,
  CUDNN_TYPE_DATA_TYPE = 3, CUDNN_TYPE_FLOAT = 4, CUDNN_TYPE_HANDLE = 5, CUDNN_TYPE_HEUR_MODE = 6,
  CUDNN_TYPE_INT64 = 7, CUDNN_TYPE_NUMERICAL_NOTE = 8, CUDNN_TYPE_VOID_PTR = 9,
};
enum cudnnBackendNumericalNote_t : int {
  CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS = 0, CUDNN_NUMERICAL_NOTE_FFT = 1,
  CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC = 2, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION = 3,
  CUDNN_NUMERICAL_NOTE_TENSOR_CORE = 4, CUDNN_NUMERICAL_NOTE_WINOGRAD = 5,
  CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13 = 6, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4 = 7,
  CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6 = 8,
};
enum cudnnBackendBehaviorNote_t : int {
  CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION = 0,
};
enum cudnnBackendHeurMode_t : int {
  CUDNN_HEUR_MODE_A = 0,
};
inline cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t* d) {
  *d = nullptr;
  return CUDNN_STATUS_NOT_SUPPORTED;
}
inline cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t) { return CUDNN_STATUS_SUCCESS; }
inline cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                              cudnnBackendAttributeType_t, int64_t, const void*) {
  return CUDNN_STATUS_NOT_SUPPORTED;
}
inline cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                              cudnnBackendAttributeType_t, int64_t, int64_t*, void*) {
  return CUDNN_STATUS_NOT_SUPPORTED;
}
inline cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t) { return CUDNN_STATUS_NOT_SUPPORTED; }
inline cudnnStatus_t cudnnBackendExecute(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t) {
  return CUDNN_STATUS_NOT_SUPPORTED;
}
