// lib conv_engine: cuDNN's graph-API engines for a plain (forward or transposed) convolution, as more candidates of the
// conv library's algorithm search (templates/conv.cuh).
//
// Why: the legacy API (cudnnConvolutionForward with one of eight algorithm enums) does not reach every
// kernel cuDNN 9 has. PyTorch's eager convolutions go through the graph API (an operation graph, the
// heuristics' engine configurations, an execution plan), and for some shapes its engine is faster than
// any legacy algorithm (a pointwise 32x256x64x64 -> 512 convolution: 0.94 ms eager, 1.27 ms for the
// best legacy algorithm on an H100), and its execution plan takes less host time per call. Here the
// engine configurations cuDNN's heuristics (mode A) list for the convolution are read in order, and the
// first STITCH_ENGINE_MAX allowed ones whose plans build become more algorithm ids, STITCH_ENGINE_ALGO(i)
// for the i-th of them. The search runs, gates and times them like the legacy algorithms and keeps the
// fastest accurate one (device plus host time); an engine is never the accuracy reference, never fused
// (our epilogue kernel follows it); TF32, down-converting, FFT, Winograd and non-deterministic engines are
// left out when TF32 is not allowed, and engines that compile at run time always.
//
// On unless STITCHCUDA_CUDNN_ENGINES=0. An engine's execution plan runs in 7-14 us of host time per call
// against 25-530 us for the legacy calls on an H100 (docs/convolutions.md), at device times within a few
// percent.
// Forward convolutions run the forward operation, transposed ones the backward-data operation.
#include <cudnn.h>

#include <stdlib.h>
#include <string.h>

#include <vector>

#define STITCH_ENGINE_FIRST (-100)  // algorithm ids at or below this are engines: -100 - index
#define STITCH_ENGINE_ALGO(i) (STITCH_ENGINE_FIRST - (i))
#define STITCH_ENGINE_INDEX(algo) (STITCH_ENGINE_FIRST - (algo))
#define STITCH_ENGINE_MAX 12  // engine configurations tried per convolution, in the heuristics' order

static bool stitch_engines_enabled() {
  static int enabled = -1;
  if (enabled < 0) {
    const char* env = getenv("STITCHCUDA_CUDNN_ENGINES");
    enabled = env == nullptr || strcmp(env, "0") != 0;
  }
  return enabled == 1;
}

static bool stitch_is_engine_algo(int algo) { return algo <= STITCH_ENGINE_FIRST; }

// The built graph of one convolution (one batch chunk size) and an execution plan per usable configuration.
struct StitchConvEngines {
  std::vector<cudnnBackendDescriptor_t> owned;  // every descriptor to destroy, in creation order
  std::vector<cudnnBackendDescriptor_t> plans;  // the usable ones, in the heuristics' order
  std::vector<int64_t> workspace;
  // For the trace (STITCHCUDA_CONV_HOST_TRACE): what the heuristics listed and what became of it.
  int64_t listed = 0;
  std::vector<int> verdicts;   // per configuration read: stitch_engine_verdict
  std::vector<int> finalized;  // per allowed configuration: the plan's status
};

static void stitch_engines_release(StitchConvEngines* e) {
  if (e == nullptr) return;
  for (size_t i = e->owned.size(); i-- > 0;) cudnnBackendDestroyDescriptor(e->owned[i]);
  delete e;
}

static cudnnStatus_t stitch_engine_new(StitchConvEngines* e, cudnnBackendDescriptorType_t type,
                                       cudnnBackendDescriptor_t* out) {
  *out = nullptr;
  const cudnnStatus_t st = cudnnBackendCreateDescriptor(type, out);
  if (st == CUDNN_STATUS_SUCCESS) e->owned.push_back(*out);
  return st;
}

// Set one attribute unless an earlier step failed (`st` keeps the first failure).
static void stitch_engine_set(cudnnStatus_t* st, cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name,
                              cudnnBackendAttributeType_t type, int64_t count, const void* value) {
  if (*st == CUDNN_STATUS_SUCCESS) *st = cudnnBackendSetAttribute(desc, name, type, count, value);
}

// A float tensor of `nb` dims, packed, with unique id `uid`.
static cudnnStatus_t stitch_engine_tensor(StitchConvEngines* e, int64_t uid, int nb, const int64_t* dims,
                                          int64_t alignment, cudnnBackendDescriptor_t* out) {
  int64_t strides[5];
  strides[nb - 1] = 1;
  for (int i = nb - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnStatus_t st = stitch_engine_new(e, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out);
  stitch_engine_set(&st, *out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  stitch_engine_set(&st, *out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nb, dims);
  stitch_engine_set(&st, *out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nb, strides);
  stitch_engine_set(&st, *out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  stitch_engine_set(&st, *out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(*out);
  return st;
}

// Whether the search may try an engine configuration: never one that compiles a kernel at run time (NVRTC:
// seconds per shape inside a verification), and without TF32 only engines whose numerical notes keep plain
// fp32 results (no tensor cores, down-converted inputs, reduced-precision reductions, FFT, Winograd or
// non-determinism). Returns STITCH_ENGINE_OK, or why not: STITCH_ENGINE_UNREADABLE, STITCH_ENGINE_COMPILES,
// or the numerical note (>= 0) that rules it out.
#define STITCH_ENGINE_OK (-1)
#define STITCH_ENGINE_UNREADABLE (-2)
#define STITCH_ENGINE_COMPILES (-3)
static int stitch_engine_verdict(cudnnBackendDescriptor_t config, int tf32) {
  cudnnBackendDescriptor_t engine = nullptr;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS)
    return STITCH_ENGINE_UNREADABLE;
  int verdict = STITCH_ENGINE_OK;
  int64_t got = 0;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &engine) !=
          CUDNN_STATUS_SUCCESS ||
      got != 1)
    verdict = STITCH_ENGINE_UNREADABLE;
  cudnnBackendBehaviorNote_t behaviour[16];
  int64_t count = 0;
  if (verdict == STITCH_ENGINE_OK && cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                                              CUDNN_TYPE_BEHAVIOR_NOTE, 16, &count,
                                                              behaviour) != CUDNN_STATUS_SUCCESS)
    verdict = STITCH_ENGINE_UNREADABLE;
  for (int64_t i = 0; verdict == STITCH_ENGINE_OK && i < count && i < 16; ++i) {
    if (behaviour[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) verdict = STITCH_ENGINE_COMPILES;
  }
  cudnnBackendNumericalNote_t notes[16];
  count = 0;
  if (verdict == STITCH_ENGINE_OK && !tf32 &&
      cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 16, &count,
                               notes) != CUDNN_STATUS_SUCCESS)
    verdict = STITCH_ENGINE_UNREADABLE;
  for (int64_t i = 0; verdict == STITCH_ENGINE_OK && !tf32 && i < count && i < 16; ++i) {
    switch (notes[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
      case CUDNN_NUMERICAL_NOTE_FFT:
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13:
        verdict = (int)notes[i];
        break;
      default:
        break;
    }
  }
  cudnnBackendDestroyDescriptor(engine);
  return verdict;
}

// Build the operation graph of y = conv(x, w), or of y = conv_transpose(x, w) when `transposed` (nb-dim packed
// tensors; spatial arrays of nb - 2 entries), and one execution plan per engine configuration the
// heuristics list (TF32 and inexact ones only if `tf32`).
static cudnnStatus_t stitch_engines_build(cudnnHandle_t h, int transposed, int nb, const int64_t* xd,
                                          const int64_t* wd, const int64_t* yd, const int64_t* pad,
                                          const int64_t* stride, const int64_t* dil, int64_t alignment, int tf32,
                                          StitchConvEngines** out) {
  *out = nullptr;
  StitchConvEngines* e = new StitchConvEngines();
  cudnnBackendDescriptor_t x = nullptr, w = nullptr, y = nullptr, conv = nullptr, op = nullptr, graph = nullptr,
                           heur = nullptr;
  const int64_t sd = nb - 2;
  cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_A;
  const float alpha = 1.f, beta = 0.f;
  cudnnStatus_t st = stitch_engine_tensor(e, 1, nb, xd, alignment, &x);
  if (st == CUDNN_STATUS_SUCCESS) st = stitch_engine_tensor(e, 2, nb, wd, alignment, &w);
  if (st == CUDNN_STATUS_SUCCESS) st = stitch_engine_tensor(e, 3, nb, yd, alignment, &y);
  if (st == CUDNN_STATUS_SUCCESS) st = stitch_engine_new(e, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv);
  stitch_engine_set(&st, conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  stitch_engine_set(&st, conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  stitch_engine_set(&st, conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sd);
  stitch_engine_set(&st, conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, sd, dil);
  stitch_engine_set(&st, conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, sd, stride);
  stitch_engine_set(&st, conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, sd, pad);
  stitch_engine_set(&st, conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, sd, pad);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(conv);
  // Forward: y = conv(x, w). Transposed: cuDNN's backward data with x as dy and y as dx (the legacy path's
  // mapping, templates/conv.cuh), the same three tensors and unique ids either way.
  if (st == CUDNN_STATUS_SUCCESS) {
    st = stitch_engine_new(e,
                           transposed ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                                      : CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                           &op);
  }
  const cudnnBackendAttributeName_t in_name = transposed ? CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY
                                                         : CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X;
  const cudnnBackendAttributeName_t out_name = transposed ? CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX
                                                          : CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y;
  stitch_engine_set(&st, op, in_name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  stitch_engine_set(&st, op, out_name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  stitch_engine_set(&st, op,
                    transposed ? CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W : CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
  stitch_engine_set(&st, op,
                    transposed ? CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC
                               : CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
  stitch_engine_set(&st, op,
                    transposed ? CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA
                               : CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                    CUDNN_TYPE_FLOAT, 1, &alpha);
  stitch_engine_set(&st, op,
                    transposed ? CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA
                               : CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                    CUDNN_TYPE_FLOAT, 1, &beta);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(op);
  if (st == CUDNN_STATUS_SUCCESS) st = stitch_engine_new(e, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph);
  stitch_engine_set(&st, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
  stitch_engine_set(&st, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(graph);
  if (st == CUDNN_STATUS_SUCCESS) st = stitch_engine_new(e, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
  stitch_engine_set(&st, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  stitch_engine_set(&st, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(heur);
  int64_t listed = 0;
  if (st == CUDNN_STATUS_SUCCESS)
    st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &listed, nullptr);
  if (st != CUDNN_STATUS_SUCCESS) {
    stitch_engines_release(e);
    return st;
  }
  e->listed = listed;
  // Every listed configuration is read: without TF32 the heuristics put the tensor-core ones first (on an
  // H100 none of the first 12 of 35-37 was allowed), and the plain fp32 ones eager runs come later.
  std::vector<cudnnBackendDescriptor_t> configs((size_t)(listed > 0 ? listed : 1), nullptr);
  for (int64_t i = 0; i < listed && st == CUDNN_STATUS_SUCCESS; ++i)
    st = stitch_engine_new(e, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &configs[(size_t)i]);
  int64_t got = 0;
  if (st == CUDNN_STATUS_SUCCESS && listed > 0)
    st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, listed, &got,
                                  configs.data());
  if (st != CUDNN_STATUS_SUCCESS) {
    stitch_engines_release(e);
    return st;
  }
  // The first STITCH_ENGINE_MAX allowed configurations whose plans build, in the heuristics' order (a
  // deterministic list for one cuDNN, GPU and shape: the disk cache stores their index).
  for (int64_t i = 0; i < got && (int)e->plans.size() < STITCH_ENGINE_MAX; ++i) {
    const int verdict = stitch_engine_verdict(configs[(size_t)i], tf32);
    e->verdicts.push_back(verdict);
    if (verdict != STITCH_ENGINE_OK) continue;
    cudnnBackendDescriptor_t plan = nullptr;
    int64_t bytes = 0, n_bytes = 0;
    cudnnStatus_t ps = stitch_engine_new(e, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
    stitch_engine_set(&ps, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    stitch_engine_set(&ps, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                      &configs[(size_t)i]);
    if (ps == CUDNN_STATUS_SUCCESS) ps = cudnnBackendFinalize(plan);  // an engine that cannot run this shape fails here
    if (ps == CUDNN_STATUS_SUCCESS)
      ps = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n_bytes, &bytes);
    e->finalized.push_back((int)ps);
    if (ps != CUDNN_STATUS_SUCCESS) continue;
    e->plans.push_back(plan);
    e->workspace.push_back(bytes);
  }
  *out = e;
  return CUDNN_STATUS_SUCCESS;
}

// Run engine `index` on (x, w) into y with the given workspace (on the handle's stream).
static cudnnStatus_t stitch_engine_run(cudnnHandle_t h, const StitchConvEngines* e, int index, const float* x,
                                       const float* w, float* y, void* ws, size_t ws_bytes) {
  if (e == nullptr || index < 0 || index >= (int)e->plans.size()) return CUDNN_STATUS_NOT_SUPPORTED;
  if ((size_t)e->workspace[(size_t)index] > ws_bytes) return CUDNN_STATUS_BAD_PARAM;
  void* pointers[3] = {const_cast<float*>(x), const_cast<float*>(w), y};
  const int64_t uids[3] = {1, 2, 3};
  cudnnBackendDescriptor_t pack = nullptr;
  cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers);
  stitch_engine_set(&st, pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
  stitch_engine_set(&st, pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(pack);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(h, e->plans[(size_t)index], pack);
  cudnnBackendDestroyDescriptor(pack);
  return st;
}
