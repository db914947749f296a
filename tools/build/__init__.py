"""A content-addressed, cached drop-in for `torch.utils.cpp_extension.load_inline` (and `load`).

Why: every candidate builds its extension at import, and the same source is evaluated again and
again (re-verification, profiling, RL rollouts). Torch's own JIT cache is keyed by the extension
*name* and lives per process, so two candidates that both call their extension `relu` collide and an
identical build is redone in every fresh worker. Here the key is a sha256 of everything that shapes
the binary (sources, functions, every flag, the name, the toolchain and the target arch): the build
directory is `<cache>/<key[:16]>` and the module is `f"{name}_{key[:12]}"`, so a second identical
build is an import and distinct programs never share a directory.

A build runs in a private temp directory under the cache root and is renamed into place only when it
succeeded, while a per-key `fcntl` lock makes parallel builders of one key wait for the first one
instead of compiling twice. Failures raise `BuildError` with the compiler's first `error:` lines
(file:line kept, build-directory paths stripped) and a log tail. Every call is recorded
(`build_records()`), which is how the worker reports seconds, cache hits and the kernel names a
candidate compiled.

`load_inline` calls go through the *direct builder* unless STITCHCUDA_BUILDER=torch: it lets torch
write its own build.ninja (so every flag is exactly torch's) and then runs the compiles itself, the
kernels (`nvcc`) in parallel with the binding (`c++`), with two cuts that keep the binary equivalent:
the binding's leading `#include <...>` block (pybind11, CUDA runtime, std) comes from a precompiled
header built once per toolchain and flag set and shared by every build, and a binding that includes
no torch header is linked without torch's libraries. Where this torch lacks the pieces it reuses,
or for anything but a plain Python module, the build falls back to torch's own `load_inline`.
(`tools.evaluate.prebuild` builds several candidates at once, each in its own worker process.)

Part of the worker island: imports only torch, the standard library, tools.process and the island.

| module | what |
|---|---|
| toolchain | torch's cpp_extension with a usable CUDA_HOME, arch flags, the effective flags, the fingerprint |
| compiler_output | the compiler's first errors and a clean log tail; BuildError |
| cache | the content-addressed cache: keys, the locked build-then-rename, per-process records |
| direct | the direct builder: torch's build.ninja flags, parallel compiles, the precompiled header |
| inline | `load_inline` / `load` through the cache, and the patch that routes a process's calls there |

The names below are the package's API: `from tools.build import cached_load_inline` keeps working.
"""

from tools.build.cache import (
    CACHE_ENV,
    FORMAT_VERSION,
    META_FILE,
    BuildRecord,
    build_records,
    cache_key,
    cached_build,
    clear_build_records,
    default_cache_dir,
)
from tools.build.compiler_output import (
    LOG_TAIL_CHARS,
    MAX_ERRORS,
    BuildError,
    log_tail,
    parse_compiler_errors,
)
from tools.build.direct import (
    BUILDER_ENV,
    PCH_ENV,
    PCH_HEADER,
    builder_choice,
    direct_build,
    include_prefix,
    inline_sources,
    pch_wanted,
    precompiled_header,
    torch_build_plan,
    uses_torch_headers,
    without_torch_libraries,
)
from tools.build.inline import cached_load, cached_load_inline, install_cached_load_inline
from tools.build.toolchain import (
    cpp_extension,
    effective_flags,
    gencode_flag,
    parse_arch,
    pip_cuda_dirs,
    toolchain_fingerprint,
    torch_arch_list,
)
from tools.cache_paths import PCH_DIR_ENV, pch_root
from tools.worker.kernel_names import kernel_names

__all__ = [
    "BUILDER_ENV",
    "CACHE_ENV",
    "FORMAT_VERSION",
    "LOG_TAIL_CHARS",
    "MAX_ERRORS",
    "META_FILE",
    "PCH_DIR_ENV",
    "PCH_ENV",
    "PCH_HEADER",
    "BuildError",
    "BuildRecord",
    "build_records",
    "builder_choice",
    "cache_key",
    "cached_build",
    "cached_load",
    "cached_load_inline",
    "clear_build_records",
    "cpp_extension",
    "default_cache_dir",
    "direct_build",
    "effective_flags",
    "gencode_flag",
    "include_prefix",
    "inline_sources",
    "install_cached_load_inline",
    "kernel_names",
    "log_tail",
    "parse_arch",
    "parse_compiler_errors",
    "pch_root",
    "pch_wanted",
    "pip_cuda_dirs",
    "precompiled_header",
    "toolchain_fingerprint",
    "torch_arch_list",
    "torch_build_plan",
    "uses_torch_headers",
    "without_torch_libraries",
]
