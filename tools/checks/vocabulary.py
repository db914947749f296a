"""The static checks' vocabulary: which names compute, which patch, spawn, stream or build, as data.

Why data: the rules read these tables, so adding an op, a timer or a builder is a one-line change
here and the rules stay short. Python names are fully qualified through the program's imports
(`torch.cuda.synchronize`); native patterns are regular expressions over comment-free sources.
"""

from __future__ import annotations

import re

# torch.* functions that allocate, reshape, move or query (not compute): never counted as fallbacks.
TORCH_NON_COMPUTE = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "tensor", "as_tensor", "as_strided", "from_numpy", "frombuffer", "arange", "linspace",
    "eye", "is_tensor", "is_floating_point", "is_grad_enabled", "no_grad", "inference_mode",
    "enable_grad", "set_grad_enabled", "device", "dtype", "Size", "Tensor", "Generator", "finfo",
    "iinfo", "get_default_dtype", "manual_seed", "seed", "cat", "concat", "concatenate", "stack",
    "hstack", "vstack", "chunk", "split", "tensor_split", "narrow", "select", "reshape", "flatten",
    "unflatten", "unsqueeze", "squeeze", "permute", "transpose", "t", "movedim", "swapaxes",
    "broadcast_to", "broadcast_tensors", "broadcast_shapes", "result_type", "promote_types",
    "can_cast", "numel", "is_nonzero", "view_as_real", "view_as_complex", "contiguous_format",
    "channels_last", "strided", "get_device", "typename", "empty_cache", "clone", "rand", "randn",
    "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal",
}  # fmt: skip
# Namespaces under torch whose calls are never compute fallbacks (they are checked by other rules).
TORCH_NON_COMPUTE_NAMESPACES = (
    "torch.cuda.", "torch.utils.", "torch.backends.", "torch.autograd.", "torch.jit.", "torch.library.",
    "torch.testing.", "torch.profiler.", "torch.distributed.", "torch.multiprocessing.", "torch.random.",
    "torch.nn.init.", "torch.nn.parameter.", "torch.nn.Parameter", "torch.nn.Module", "torch.nn.utils.",
    "torch.types.", "torch.overrides.", "torch._C.", "torch.Tensor.data_ptr", "torch.cpu.",
)  # fmt: skip
# Tensor methods that are compute (a fallback when called in runtime code); '_' in-place variants too.
COMPUTE_METHODS = {
    "abs", "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide",
    "neg", "negative", "pow", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10",
    "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "atan2", "sigmoid", "relu",
    "gelu", "silu", "mish", "softplus", "hardtanh", "leaky_relu", "elu", "selu", "celu", "hardswish",
    "hardsigmoid", "softmax", "log_softmax", "softmin", "sum", "nansum", "mean", "nanmean", "prod",
    "max", "min", "amax", "amin", "aminmax", "argmax", "argmin", "var", "std", "var_mean", "std_mean",
    "norm", "renorm", "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv", "dot", "vdot",
    "outer", "ger", "inner", "cross", "kron", "tensordot", "clamp", "clip", "clamp_min", "clamp_max",
    "where", "masked_fill", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "sort", "argsort",
    "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "logsumexp", "erf", "erfc", "erfinv",
    "floor", "ceil", "round", "trunc", "frac", "sign", "sgn", "reciprocal", "square", "lerp",
    "addcmul", "addcdiv", "maximum", "minimum", "fmax", "fmin", "fmod", "remainder", "hypot",
    "logaddexp", "logit", "xlogy", "all", "any", "count_nonzero", "histc", "bincount", "unique",
    "logical_and", "logical_or", "logical_xor", "logical_not", "eq", "ne", "gt", "lt", "ge", "le",
    "isclose", "allclose", "equal", "einsum", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "linear", "bilinear", "layer_norm", "group_norm",
    "batch_norm", "instance_norm", "rms_norm", "dropout", "max_pool1d", "max_pool2d", "max_pool3d",
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "adaptive_max_pool2d", "interpolate", "cdist", "pdist", "cosine_similarity",
    "pairwise_distance", "triu", "tril", "diag_embed", "trace", "det", "inverse", "cholesky", "qr",
    "svd", "lu", "solve", "matrix_power", "matrix_exp", "scaled_dot_product_attention", "embedding",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
    "binary_cross_entropy", "hinge_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
    "cosine_embedding_loss", "gather", "scatter", "scatter_add", "scatter_reduce", "index_add",
    "index_put", "put", "take", "masked_scatter", "masked_select", "nonzero", "sigmoid_", "polar",
}  # fmt: skip
# nn modules that compute nothing when called (containers, parameters, views).
NN_NON_COMPUTE = {
    "Module", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Parameter", "Buffer",
    "Identity", "Flatten", "Unflatten",
}  # fmt: skip
NN_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
F_NON_COMPUTE = {"pad"}
LOW_PRECISION_DTYPES = {"float16", "half", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz"}
LOW_PRECISION_METHODS = {"half", "bfloat16"}
PATCHABLE_ROOTS = {
    "torch", "time", "math", "os", "sys", "builtins", "numpy", "functools", "threading", "gc",
    "inspect", "random", "contextlib", "importlib", "timeit", "statistics", "unittest", "pytest",
}  # fmt: skip
THREAD_MODULES = {
    "threading", "_thread", "multiprocessing", "concurrent", "concurrent.futures", "asyncio",
    "subprocess", "torch.multiprocessing", "pty", "sched",
}  # fmt: skip
OS_PROCESS_CALLS = {
    "fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "spawnl", "spawnle", "spawnlp",
    "spawnv", "spawnve", "spawnvp", "execv", "execve", "execl", "execlp", "execvp", "startfile",
}  # fmt: skip
BUILDERS = {
    "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load",
    "cupy.RawKernel", "cupy.RawModule", "cupy.ElementwiseKernel", "cupy.ReductionKernel",
    "torch.cuda.jiterator._create_jit_fn", "torch.cuda.jiterator._create_multi_output_jit_fn",
    "cuda.core.experimental.Program", "numba.cuda.jit", "triton.jit",
}  # fmt: skip
STREAM_CALLS = {
    "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.cuda.set_stream",
    "torch.Stream", "torch.cuda.StreamContext", "torch.cuda.streams.Stream", "cupy.cuda.Stream",
}  # fmt: skip
INTROSPECTION_CALLS = {
    "sys._getframe", "inspect.stack", "inspect.currentframe", "inspect.getouterframes",
    "inspect.getinnerframes", "inspect.trace", "inspect.getframeinfo", "gc.get_objects",
    "gc.get_referrers", "gc.get_referents", "traceback.extract_stack", "traceback.walk_stack",
}  # fmt: skip
FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame"}
DYNAMIC_CODE = {"exec", "eval", "compile", "__import__", "builtins.exec", "builtins.eval",
                "importlib.import_module", "importlib.__import__"}  # fmt: skip
EMPTY_ALLOCATORS = {"torch.empty", "torch.empty_like", "torch.empty_strided"}
EMPTY_METHODS = {"new_empty", "new_empty_strided"}
CONSTANT_ALLOCATORS = {"torch.zeros", "torch.ones", "torch.full", "torch.zeros_like", "torch.ones_like",
                       "torch.full_like"}  # fmt: skip
TF32_FLAGS = ("allow_tf32", "fp32_precision", "allow_fp16_reduced_precision_reduction",
              "allow_bf16_reduced_precision_reduction")  # fmt: skip

# Native sources (C++/CUDA strings), read with comments stripped.
NATIVE_MARKERS = re.compile(
    r"#include|__global__|__device__|PYBIND11_MODULE|TORCH_LIBRARY|extern\s+\"C\"|<<<|cudaStream_t|\bat::|torch::"
)
TORCH_HEADERS_RE = re.compile(r"#\s*include\s*[<\"](torch/|ATen/|c10/)")

NATIVE_RULES: list[tuple[str, str, re.Pattern[str], str]] = [
    ("threads_or_processes", "error",
     re.compile(r"std::(j?thread|async)\b|\bpthread_create\b|#\s*include\s*<(thread|future)>|\bfork\s*\(|\bpopen\s*\(|\bsystem\s*\("),
     "native code starts threads or processes"),
    ("persisting_l2", "error",
     re.compile(r"PersistingL2|accessPolicyWindow|AccessPolicyWindow|cudaAccessPropertyPersisting|hitProp|PERSISTING_L2|cudaCtxResetPersistingL2Cache"),
     "persisting-L2 window or limit: data survives the harness's L2 flush"),
    ("device_tampering", "error",
     re.compile(r"\bcudaDeviceReset\b|\bcuCtxDestroy|\bcuDevicePrimaryCtxReset|\bcudaSetDeviceFlags\b|\bcudaProfilerStop\b"),
     "context-level CUDA call that can disturb the harness"),
    ("precision_downgrade", "warning",
     re.compile(r"__float2half|__half2float|__float2bfloat16|__nv_bfloat16|\b__half2?\b|\bhalf2\b|cuda_fp16\.h|cuda_bf16\.h|FAST_TF32|FAST_16F|FAST_16BF|CUBLAS_TF32_TENSOR_OP_MATH|CUBLAS_COMPUTE_16F|CUDA_R_16F|CUDA_R_16BF|precision::tf32|__float_to_tf32|\.tf32|ALLOW_CONVERSION|__nv_fp8"),
     "lower-precision arithmetic in an fp32 program"),
]  # fmt: skip
NATIVE_STREAM_RE = re.compile(
    r"cudaStreamCreate\w*|getStreamFromPool|cudaStreamPerThread|cuStreamCreate\w*|getStreamFromExternal"
)
NATIVE_JOIN_RE = re.compile(
    r"cudaStreamSynchronize|cudaStreamWaitEvent|cudaDeviceSynchronize|cudaEventSynchronize"
)
NATIVE_TORCH_CALL_RE = re.compile(r"\b(?:at|torch)::(?:native::)?([a-z_]\w*)\s*\(")
NATIVE_TORCH_NN_RE = re.compile(r"\btorch::nn::functional::(\w+)\s*\(")
NATIVE_TENSOR_METHOD_RE = re.compile(r"(?:\.|->)\s*([a-z_]\w*)\s*\(")
NATIVE_NON_COMPUTE = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "from_blob", "tensor", "device", "dtype", "requires_grad", "kCUDA", "kFloat", "scalar_type", "typeMetaToScalarType",
}  # fmt: skip

# Input pointers and caches keyed by them.
PTR_METHODS = {"data_ptr", "untyped_storage", "storage", "_cdata", "unsafe_ptr"}
PTR_FUNCTIONS = {"id", "hash", "builtins.id"}  # their value names an object, not its data
PTR_ATTRS = {"_cdata", "__cuda_array_interface__"}
MAP_FACTORIES = {"dict", "OrderedDict", "defaultdict", "WeakKeyDictionary", "WeakValueDictionary", "Counter"}
LOOKUP_METHODS = {"get", "setdefault", "pop", "__contains__", "__getitem__"}  # a cache read through a method
MEMOIZERS = {"lru_cache", "cache", "cached"}  # decorators, by their last name

# Tampering with the harness: errors swallowed, threads, streams, patches, subclasses, imports.
SUPPRESSORS = {"contextlib.suppress", "suppress"}  # context managers that swallow errors
THREAD_ROOTS = {"threading", "_thread", "multiprocessing"}  # every submodule of these counts too
GRAPH_CALLS = {"torch.cuda.graph", "torch.cuda.CUDAGraph"}  # CUDA-graph capture (a joined stream)
STREAM_JOIN_METHODS = {"wait_stream", "wait_event", "synchronize"}  # what joins a side stream back
ATTRIBUTE_SETTERS = {"setattr", "delattr", "builtins.setattr", "object.__setattr__"}
MOCK_PREFIXES = ("unittest.mock", "mock.")
MOCK_CALLS = {"patch", "patch.object"}
PATCHABLE_MAPPINGS = {"os.environ", "__builtins__", "builtins.__dict__", "sys.modules"}  # item writes patch
GLOBAL_SETTING_CALLS = {
    "torch.set_default_tensor_type", "torch.use_deterministic_algorithms", "torch.set_flush_denormal",
    "torch.cuda.set_per_process_memory_fraction", "torch.set_num_threads", "os.putenv",
    "torch.cuda.set_device", "torch.set_default_device",
}  # fmt: skip
ENVIRON_WRITERS = {"update", "setdefault", "pop", "clear"}  # os.environ methods that write
TENSOR_BASES = {"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "Tensor"}
DISPATCH_MODES = ("TorchDispatchMode", "TorchFunctionMode")  # base-class name suffixes
TORCH_HOOKS = {"__torch_function__", "__torch_dispatch__"}
SUBCLASS_ATTRS = {"_make_subclass", "_make_wrapper_subclass", "as_subclass", "_python_dispatch"}
HARNESS_PACKAGES = {"tools", "graph", "nodes", "evals", "problem"}  # importing these reaches the harness

# Where the work happens.
TORCH_COMPUTE_NAMESPACES = ("torch.linalg.", "torch.fft.", "torch.special.")  # every call there computes
NON_TENSOR_RECEIVERS = {
    "math",
    "np",
    "numpy",
    "os",
    "re",
    "cmath",
    "operator",
}  # `.exp()` there is no tensor op
NON_WRITING_INPLACE = {"requires_grad_", "share_memory_"}  # trailing "_" methods that write no values
