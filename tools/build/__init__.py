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
`prebuild` builds several candidates at once, each in its own worker process.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from tools.checks import kernel_names

CACHE_ENV = "STITCHCUDA_CACHE"
FORMAT_VERSION = 1  # bump when the layout of a cache entry changes
META_FILE = "stitch_build.json"
MAX_ERRORS = 10
LOG_TAIL_CHARS = 4000

_DOTTED_ARCH_RE = re.compile(r"(\d{1,2})\.(\d)([af]?)")  # TORCH_CUDA_ARCH_LIST style: 9.0, 10.0a
_NAMED_ARCH_RE = re.compile(r"(?:sm_|compute_)?(\d{2,3})([af]?)")  # sm_90, compute_100a, 90
_ERROR_RE = re.compile(
    r"(\berror\b\s*:|\bfatal\b|undefined reference|undefined symbol|cannot find -l|multiple definition"
    r"|No such file or directory)",
    re.IGNORECASE,
)
_NOISE_RE = re.compile(
    r"^(\[\d+/\d+\]|FAILED:|ninja: |compilation terminated|In file included from|\s+from "
    r"|(\S*/)?(c\+\+|g\+\+|gcc|cc|clang\+*|nvcc|ccache|ld)\s+-)"  # echoed compiler command lines
)
_TORCH_PREFIX_RE = re.compile(r"^Error building extension '[^']*':\s*")


class BuildError(Exception):
    """An extension failed to compile, link or load; str() is one line naming the first error."""

    def __init__(self, name: str, errors: list[str], log_tail: str, seconds: float) -> None:
        self.name = name
        self.errors = errors
        self.log_tail = log_tail
        self.seconds = seconds
        first = errors[0] if errors else "see the build log"
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"building extension '{name}' failed: {first}{more}")


@dataclass
class BuildRecord:
    """One `load_inline`/`load` call in this process: what the worker reports about builds."""

    name: str
    module_name: str
    key: str
    directory: str
    ok: bool
    cached: bool
    seconds: float
    kernels: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    log_tail: str = ""
    builder: str = ""  # "direct" or "torch" for a fresh build; "" for a cache hit
    phases: dict[str, Any] = field(default_factory=dict)  # direct builds: seconds per step, PCH use

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_RECORDS: list[BuildRecord] = []
_LOADED: dict[str, Any] = {}  # key -> module (or library path) already imported by this process
_PROCESS_LOCK = threading.Lock()


def build_records() -> list[BuildRecord]:
    """Every build this process asked for, in call order."""
    return list(_RECORDS)


def clear_build_records() -> None:
    _RECORDS.clear()


def default_cache_dir() -> Path:
    """`$STITCHCUDA_CACHE`, else ~/.cache/stitchcuda/build."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "stitchcuda" / "build"


# ----------------------------------------------------------------------------------------------
# Toolchain, arch and flags
# ----------------------------------------------------------------------------------------------


def _guess_cuda_home() -> str | None:
    """A CUDA_HOME with real headers: `nvcc` on PATH may be a wrapper script in /usr/local/bin."""
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent)
    candidates.append(Path("/usr/local/cuda"))
    for home in candidates:
        if (home / "bin" / "nvcc").exists() and (home / "include" / "cuda_runtime.h").exists():
            return str(home)
    return None


def cpp_extension() -> types.ModuleType:
    """`torch.utils.cpp_extension`, imported after pointing CUDA_HOME at a toolkit with headers."""
    if "torch.utils.cpp_extension" not in sys.modules and not (
        os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    ):
        home = _guess_cuda_home()
        if home:
            os.environ["CUDA_HOME"] = home
    import torch.utils.cpp_extension as ce

    return ce


def parse_arch(arch: str) -> tuple[str, str]:
    """'sm_90' / 'compute_90a' / '90' / '9.0' / '10.0a' -> ('90', 'a'); ValueError for anything else."""
    text = arch.strip().lower()
    dotted = _DOTTED_ARCH_RE.fullmatch(text)
    if dotted:
        return f"{dotted[1]}{dotted[2]}", dotted[3]
    named = _NAMED_ARCH_RE.fullmatch(text)
    if named:
        return named[1], named[2]
    raise ValueError(f"unknown CUDA arch {arch!r}; expected e.g. sm_90, sm_90a or 9.0")


def gencode_flag(arch: str) -> str:
    digits, suffix = parse_arch(arch)
    return f"-gencode=arch=compute_{digits}{suffix},code=sm_{digits}{suffix}"


def torch_arch_list(arch: str) -> str:
    """The TORCH_CUDA_ARCH_LIST spelling of an arch: sm_90a -> 9.0a."""
    digits, suffix = parse_arch(arch)
    return f"{digits[:-1]}.{digits[-1]}{suffix}"


def _command_output(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable ({type(exc).__name__})"
    return (done.stdout + done.stderr).strip()


def _nvcc_path() -> str:
    home = cpp_extension().CUDA_HOME or "/usr/local/cuda"
    return os.environ.get("PYTORCH_NVCC") or os.path.join(home, "bin", "nvcc")


@functools.cache
def toolchain_fingerprint(with_cuda: bool) -> dict[str, str]:
    """What besides the sources decides the binary: compilers, torch, Python ABI, machine."""
    info = {
        "torch": torch.__version__,
        "torch_cuda": str(torch.version.cuda),
        "cxx11_abi": str(torch._C._GLIBCXX_USE_CXX11_ABI),
        "python": f"{sys.implementation.cache_tag} {sysconfig.get_config_var('EXT_SUFFIX')}",
        "machine": os.uname().machine,
        "cxx": _command_output([os.environ.get("CXX", "c++"), "--version"]).split("\n", 1)[0],
    }
    if with_cuda:
        info["nvcc"] = _command_output([_nvcc_path(), "--version"])
    return info


def pip_cuda_dirs() -> tuple[Path | None, Path | None]:
    """(include, lib) of the pip CUDA package next to torch (site-packages/nvidia/cu13), if present.

    Torch's CUDA headers include cuBLAS/cuSPARSE headers that a trimmed toolkit may lack; the pip
    package that torch itself depends on carries them.
    """
    major = (torch.version.cuda or "").split(".")[0]
    if not major:
        return None, None
    root = Path(torch.__file__).resolve().parent.parent / "nvidia" / f"cu{major}"
    include = root / "include"
    lib = root / "lib"
    return (include if include.is_dir() else None), (lib if lib.is_dir() else None)


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def _temporary_env(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


@dataclass
class _Flags:
    cflags: list[str]
    cuda_cflags: list[str]
    ldflags: list[str]
    include_paths: list[str]
    env: dict[str, str]


def _effective_flags(
    cflags: list[str],
    cuda_cflags: list[str],
    ldflags: list[str],
    include_paths: list[str],
    with_cuda: bool,
    arch: str | None,
    source_count: int,
) -> _Flags:
    """The user's flags plus what this machine needs: pip CUDA headers/libs, the arch, MAX_JOBS."""
    cflags, cuda_cflags, ldflags = list(cflags), list(cuda_cflags), list(ldflags)
    env = {}
    if "MAX_JOBS" not in os.environ:
        env["MAX_JOBS"] = str(max(1, min(_available_cpus(), source_count)))
    if with_cuda:
        include, lib = pip_cuda_dirs()
        if include is not None:
            # -isystem after torch's own -isystem CUDA_HOME/include: fills gaps, never shadows the toolkit.
            cflags += ["-isystem", str(include)]
            cuda_cflags += ["-isystem", str(include)]
        if lib is not None:
            ldflags += [f"-L{lib}", f"-Wl,-rpath,{lib}"]
        # Torch itself skips its arch flags when any user flag mentions an arch; do the same.
        if arch and not any("arch" in f for f in cuda_cflags):
            cuda_cflags.append(gencode_flag(arch))
        if arch:
            env["TORCH_CUDA_ARCH_LIST"] = torch_arch_list(arch)
    return _Flags(cflags, cuda_cflags, ldflags, list(include_paths), env)


def cache_key(material: dict[str, Any]) -> str:
    """sha256 over a canonical JSON of everything that decides the binary."""
    blob = json.dumps({"format": FORMAT_VERSION, **material}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


# ----------------------------------------------------------------------------------------------
# Compiler output
# ----------------------------------------------------------------------------------------------


def _clean_line(line: str, build_dirs: Sequence[str]) -> str:
    for d in build_dirs:
        if d:
            line = line.replace(d.rstrip("/") + "/", "")
    return line.strip()


def parse_compiler_errors(output: str, build_dirs: Sequence[str] = (), limit: int = MAX_ERRORS) -> list[str]:
    """The first distinct `error:` lines of nvcc/g++/ld output, with build-directory paths stripped."""
    errors: list[str] = []
    linker_summary: list[str] = []
    for raw in _TORCH_PREFIX_RE.sub("", output).splitlines():
        if _NOISE_RE.match(raw) or len(raw) > 2000:  # ninja's echo of whole compile commands
            continue
        line = _clean_line(raw, build_dirs)
        if not line or not _ERROR_RE.search(line):
            continue
        if "ld returned" in line:
            linker_summary.append(line)  # a summary, kept only when nothing better was said
            continue
        if line not in errors:
            errors.append(line)
        if len(errors) >= limit:
            break
    return errors or linker_summary[:limit]


def log_tail(output: str, build_dirs: Sequence[str] = (), chars: int = LOG_TAIL_CHARS) -> str:
    """The end of a build log without ninja's command echo (whole compiler command lines)."""
    raw_lines = _TORCH_PREFIX_RE.sub("", output).splitlines()
    lines = [_clean_line(raw, build_dirs) for raw in raw_lines if not _NOISE_RE.match(raw)]
    text = "\n".join(line for line in lines if line and len(line) <= 2000)
    return text[-chars:]


# ----------------------------------------------------------------------------------------------
# The cached build
# ----------------------------------------------------------------------------------------------


def _library_file(directory: Path, module_name: str) -> Path:
    return directory / f"{module_name}.so"


def _import_library(path: Path, module_name: str, is_python_module: bool) -> Any:
    """Load a finished build without touching the compiler (what torch does after a no-op ninja)."""
    if not is_python_module:
        torch.ops.load_library(str(path))
        return str(path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load extension module {module_name} from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cached_build(
    name: str,
    material: dict[str, Any],
    with_cuda: bool,
    is_python_module: bool,
    kernels: list[str],
    build: Callable[[str, str], Any],
    cache_dir: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    on_start: Callable[[str], None] | None = None,
    details: dict[str, Any] | None = None,
) -> Any:
    """Return the module for `material`, building it with `build(tmp_dir, module_name)` on a miss.

    details: a dict the build callable fills ("builder", "phases"); kept in the record and the entry.
    """
    details = details if details is not None else {}
    if on_start is not None:
        on_start(name)
    key = cache_key({"name": name, **material, "toolchain": toolchain_fingerprint(with_cuda)})
    module_name = f"{name}_{key[:12]}"
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    final = root / key[:16]
    started = time.perf_counter()

    def record(ok: bool, cached: bool, errors: list[str] | None = None, tail: str = "") -> None:
        _RECORDS.append(
            BuildRecord(
                name=name,
                module_name=module_name,
                key=key,
                directory=str(final),
                ok=ok,
                cached=cached,
                seconds=round(time.perf_counter() - started, 3),
                kernels=kernels,
                errors=errors or [],
                log_tail=tail,
                builder="" if cached else str(details.get("builder", "")),
                phases={} if cached else dict(details.get("phases", {})),
            )
        )

    with _PROCESS_LOCK:
        if key in _LOADED:
            record(True, True)
            return _LOADED[key]
        root.mkdir(parents=True, exist_ok=True)
        (root / "locks").mkdir(exist_ok=True)
        with open(root / "locks" / f"{key[:16]}.lock", "w") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)  # released by the kernel even if we are killed
            try:
                if (final / META_FILE).exists():
                    try:
                        loaded = _import_library(
                            _library_file(final, module_name), module_name, is_python_module
                        )
                    except Exception as exc:
                        record(False, True, [f"loading the cached build failed: {exc}"])
                        raise BuildError(name, [f"loading the cached build failed: {exc}"], "", 0.0) from None
                    _LOADED[key] = loaded
                    record(True, True)
                    return loaded
                tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=root))
                dirs = [str(tmp), str(tmp.resolve())]
                try:
                    with _temporary_env(env or {}):
                        loaded = build(str(tmp), module_name)
                except Exception as exc:
                    output = str(exc)  # torch puts the captured compiler output into its message
                    errors = parse_compiler_errors(output, dirs) or [
                        f"{type(exc).__name__}: {_clean_line(output.splitlines()[0] if output else '', dirs)}"
                    ]
                    tail = log_tail(output, dirs)
                    shutil.rmtree(tmp, ignore_errors=True)
                    record(False, False, errors, tail)
                    raise BuildError(name, errors, tail, time.perf_counter() - started) from None
                meta = {"name": name, "module_name": module_name, "key": key, "kernels": kernels}
                meta["seconds"] = round(time.perf_counter() - started, 3)
                meta.update({k: details[k] for k in ("builder", "phases", "commands") if k in details})
                (tmp / META_FILE).write_text(json.dumps(meta, indent=1))
                try:
                    os.rename(tmp, final)
                except OSError:  # someone finished the same key without our lock: theirs is as good
                    shutil.rmtree(tmp, ignore_errors=True)
                if not is_python_module:
                    loaded = str(_library_file(final, module_name))
                _LOADED[key] = loaded
                record(True, False)
                return loaded
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)


# ----------------------------------------------------------------------------------------------
# The direct build: torch's flags, our own compile steps
# ----------------------------------------------------------------------------------------------

BUILDER_ENV = "STITCHCUDA_BUILDER"  # "direct" (default) or "torch"
PCH_ENV = "STITCHCUDA_PCH"  # "0" turns the precompiled binding header off
PCH_DIR_ENV = "STITCHCUDA_PCH_DIR"  # where precompiled headers live (default: <cache>-pch beside the cache)
PCH_HEADER = "stitch_pch.h"
_TORCH_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"](?:torch|ATen|c10|caffe2)/', re.MULTILINE)
_SYSTEM_INCLUDE_RE = re.compile(r"#\s*include\s*<([^<>]+)>")
_TORCH_LIBS = frozenset(
    {
        "-lc10",
        "-lc10_cuda",
        "-lc10_hip",
        "-ltorch_cpu",
        "-ltorch_cuda",
        "-ltorch_hip",
        "-ltorch",
        "-ltorch_python",
    }
)


class _DirectUnavailable(Exception):
    """This torch lacks a private piece the direct builder reuses: build with torch's load_inline."""


def builder_choice() -> str:
    """'direct' unless STITCHCUDA_BUILDER=torch (the benchmark's 'before' column uses that)."""
    return "torch" if os.environ.get(BUILDER_ENV, "direct").strip().lower() == "torch" else "direct"


def pch_root(cache_root: Path) -> Path:
    """$STITCHCUDA_PCH_DIR, else `<cache>-pch` beside the build cache (one set per toolchain and flags)."""
    env = os.environ.get(PCH_DIR_ENV)
    return Path(env).expanduser() if env else cache_root.with_name(cache_root.name + "-pch")


def inline_sources(
    cpp_sources: list[str],
    cuda_sources: list[str],
    functions: str | Sequence[str] | dict[str, str] | None,
    with_pytorch_error_handling: bool,
    no_implicit_headers: bool,
) -> tuple[str, str | None]:
    """main.cpp and cuda.cu (None without CUDA sources) exactly as torch's load_inline writes them."""
    cpp = list(cpp_sources)
    if not no_implicit_headers:
        cpp.insert(0, "#include <torch/extension.h>")
    if functions is not None:
        if isinstance(functions, str):
            functions = [functions]
        if isinstance(functions, list | tuple):
            functions = {f: f for f in functions}
        if not isinstance(functions, dict):
            raise ValueError(f"Expected 'functions' to be a list or dict, but was {type(functions)}")
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for fname, doc in functions.items():
            target = f"torch::wrap_pybind_function({fname})" if with_pytorch_error_handling else fname
            cpp.append(f'm.def("{fname}", {target}, "{doc}");')
        cpp.append("}")
    if not cuda_sources:
        return "\n".join(cpp), None
    cuda = list(cuda_sources)
    if not no_implicit_headers:
        cuda[:0] = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
    return "\n".join(cpp), "\n".join(cuda)


def uses_torch_headers(*sources: str | None) -> bool:
    return any(src and _TORCH_INCLUDE_RE.search(src) for src in sources)


def include_prefix(source: str) -> list[str]:
    """The `<...>` headers of the source's leading include block (blank, `//` and #line lines skipped).

    Precompiling exactly these and force-including them first changes nothing in what the source
    sees: its own #includes of them are then no-ops behind their include guards.
    """
    headers: list[str] = []
    for raw in source.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", "#line", "# line")) or line == "#pragma once":
            continue
        match = _SYSTEM_INCLUDE_RE.fullmatch(line)
        if not match:
            break
        headers.append(match.group(1).strip())
    return headers


def _call_with_known(fn: Callable[..., Any], **kwargs: Any) -> Any:
    """Call a torch-private function with the keyword arguments its signature knows."""
    import inspect

    params = inspect.signature(fn).parameters
    required = [
        n for n, p in params.items() if p.default is inspect.Parameter.empty and p.kind != p.VAR_KEYWORD
    ]
    if any(n not in kwargs for n in required):
        raise _DirectUnavailable(f"{fn.__name__} wants {required}")
    return fn(**{k: v for k, v in kwargs.items() if k in params})


def _ninja_variables(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        if line[:1].isspace() or " = " not in line or line.startswith(("rule ", "build ", "default ")):
            continue
        key, value = line.split(" = ", 1)
        values[key.strip()] = value.strip()
    return values


@dataclass
class _Plan:
    """The commands torch would run for one extension (parsed from the build.ninja it writes)."""

    cxx: list[str]
    nvcc: list[str]
    cflags: list[str]
    post_cflags: list[str]
    cuda_cflags: list[str]
    cuda_post_cflags: list[str]
    ldflags: list[str]


def torch_build_plan(directory: str, name: str, sources: list[str], flags: _Flags, with_cuda: bool) -> _Plan:
    """Let this torch write its build.ninja for `sources` and read the compilers and flags from it."""
    import shlex

    ce = cpp_extension()
    writer = getattr(ce, "_write_ninja_file_to_build_library", None)
    prepare = getattr(ce, "_prepare_ldflags", None)
    if writer is None or prepare is None:
        raise _DirectUnavailable("torch.utils.cpp_extension has no ninja writer")
    ldflags = _call_with_known(
        prepare,
        extra_ldflags=list(flags.ldflags),
        with_cuda=with_cuda,
        with_sycl=False,
        verbose=False,
        is_standalone=False,
    )
    path = os.path.join(directory, "build.ninja")
    _call_with_known(
        writer,
        path=path,
        name=name,
        sources=sources,
        extra_cflags=list(flags.cflags),
        extra_cuda_cflags=list(flags.cuda_cflags),
        extra_sycl_cflags=[],
        extra_ldflags=ldflags,
        extra_include_paths=list(flags.include_paths),
        with_cuda=with_cuda,
        with_sycl=False,
        is_standalone=False,
    )
    values = _ninja_variables(Path(path).read_text())
    if "cxx" not in values or "cflags" not in values or "ldflags" not in values:
        raise _DirectUnavailable("unexpected build.ninja layout")
    if with_cuda and "nvcc" not in values:
        raise _DirectUnavailable("build.ninja names no nvcc")

    def split(key: str) -> list[str]:
        return shlex.split(values.get(key, ""))

    return _Plan(
        cxx=split("cxx"),
        nvcc=split("nvcc"),
        cflags=split("cflags"),
        post_cflags=split("post_cflags"),
        cuda_cflags=split("cuda_cflags"),
        cuda_post_cflags=split("cuda_post_cflags"),
        ldflags=split("ldflags"),
    )


def without_torch_libraries(ldflags: list[str]) -> list[str]:
    """Drop torch's own -L/-l flags: a binding that includes no torch header references none of them."""
    ce = cpp_extension()
    torch_lib = getattr(ce, "TORCH_LIB_PATH", os.path.join(os.path.dirname(torch.__file__), "lib"))
    return [f for f in ldflags if f not in _TORCH_LIBS and f != f"-L{torch_lib}"]


def _run(cmd: list[str], cwd: str) -> tuple[int, str, float]:
    started = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace", check=False)
    except OSError as exc:
        return 127, f"{cmd[0]}: error: cannot run the compiler: {exc}", time.perf_counter() - started
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


def precompiled_header(
    root: Path, cxx: list[str], flags: list[str], headers: list[str]
) -> tuple[Path | None, float, str]:
    """(header to force-include, seconds spent building it here, note) for `headers` under `flags`.

    One .gch per (compiler, flags, header list), built under a lock into `root` and renamed into
    place, so concurrent builders wait for the first one. None when it cannot be built.
    """
    text = "".join(f"#include <{h}>\n" for h in headers)
    key = cache_key({"pch": text, "cxx": cxx, "version": toolchain_fingerprint(False)["cxx"], "flags": flags})
    final = root / key[:16]
    header = final / PCH_HEADER
    if (header.parent / (PCH_HEADER + ".gch")).exists():
        return header, 0.0, "cached"
    started = time.perf_counter()
    (root / "locks").mkdir(parents=True, exist_ok=True)
    with open(root / "locks" / f"{key[:16]}.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            if (final / (PCH_HEADER + ".gch")).exists():
                return header, time.perf_counter() - started, "waited"
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=root))
            (tmp / PCH_HEADER).write_text(text)
            cmd = [*cxx, *flags, "-x", "c++-header", PCH_HEADER, "-o", PCH_HEADER + ".gch"]
            code, output, _ = _run(cmd, str(tmp))
            if code != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                first = next((line for line in output.splitlines() if "error" in line), output[:200])
                return None, time.perf_counter() - started, f"failed: {first.strip()}"
            (tmp / "stitch_pch.json").write_text(json.dumps({"headers": headers, "flags": flags, "cxx": cxx}))
            try:
                os.rename(tmp, final)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
            return header, time.perf_counter() - started, "built"
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _pch_wanted(headers: list[str]) -> bool:
    """Worth it for a pybind11 binding; never for torch's headers (a .gch of them is ~1 GB)."""
    heavy = any(h.split("/", 1)[0] in ("torch", "ATen", "c10", "caffe2") for h in headers)
    return (
        os.environ.get(PCH_ENV, "1") != "0" and not heavy and any(h.startswith("pybind11/") for h in headers)
    )


def direct_build(
    directory: str,
    module_name: str,
    main_cpp: str,
    cuda_cu: str | None,
    flags: _Flags,
    pch_dir: Path,
    details: dict[str, Any],
) -> Any:
    """Build and import `module_name` in `directory` with torch's commands, run here in parallel.

    Fills details["phases"] (seconds per step, the PCH's state) and details["commands"]. A compile
    error raises RuntimeError("Error building extension ...: <compiler output>"), as torch does.
    """
    with_cuda = cuda_cu is not None
    main_path = os.path.join(directory, "main.cpp")
    Path(main_path).write_text(main_cpp)
    sources = [main_path]
    if with_cuda:
        sources.append(os.path.join(directory, "cuda.cu"))
        Path(sources[1]).write_text(cuda_cu or "")
    plan = torch_build_plan(directory, module_name, sources, flags, with_cuda)
    phases: dict[str, Any] = {}
    commands: dict[str, list[str]] = {}
    details.update(builder="direct", phases=phases, commands=commands)

    results: dict[str, tuple[int, str, float]] = {}
    nvcc_thread = None
    if with_cuda:
        commands["nvcc"] = [*plan.nvcc, *plan.cuda_cflags, "-c", sources[1], "-o", "cuda.cuda.o"]
        commands["nvcc"] += plan.cuda_post_cflags

        def compile_cuda() -> None:
            results["nvcc"] = _run(commands["nvcc"], directory)

        nvcc_thread = threading.Thread(target=compile_cuda, daemon=True)
        nvcc_thread.start()

    cxx_cmd = [*plan.cxx, *plan.cflags]
    headers = include_prefix(main_cpp)
    phases["pch"] = "off"
    if _pch_wanted(headers):
        pch_flags = [f for f in plan.cflags if not f.startswith("-DTORCH_EXTENSION_NAME=")] + plan.post_cflags
        header, seconds, note = precompiled_header(pch_dir, plan.cxx, pch_flags, headers)
        phases["pch"], phases["pch_s"] = note, round(seconds, 3)
        if header is not None:
            cxx_cmd += ["-include", str(header), "-Winvalid-pch"]
            phases["pch_header"] = str(header)
    commands["cxx"] = [*cxx_cmd, "-c", main_path, "-o", "main.o", *plan.post_cflags]
    results["cxx"] = _run(commands["cxx"], directory)
    if nvcc_thread is not None:
        nvcc_thread.join()
    for step in ("cxx", "nvcc"):
        if step in results:
            phases[f"{step}_s"] = round(results[step][2], 3)
    if "pch_header" in phases:
        phases["pch_used"] = ".gch: not used because" not in results["cxx"][1]
    failed = [(step, out) for step, (code, out, _) in results.items() if code != 0]
    if failed:
        text = "\n".join(f"FAILED: {step}\n{out}" for step, out in sorted(failed))
        raise RuntimeError(f"Error building extension '{module_name}': {text}")

    torch_free = not uses_torch_headers(main_cpp, cuda_cu)
    objects = ["main.o", *(["cuda.cuda.o"] if with_cuda else [])]
    library = f"{module_name}.so"
    ldflags = without_torch_libraries(plan.ldflags) if torch_free else plan.ldflags
    commands["link"] = [*plan.cxx, *objects, *ldflags, "-o", library]
    code, output, seconds = _run(commands["link"], directory)
    phases["link_s"] = round(seconds, 3)
    phases["torch_libs"] = not torch_free
    if code != 0:
        raise RuntimeError(f"Error building extension '{module_name}': FAILED: link\n{output}")
    started = time.perf_counter()
    try:
        module = _import_library(Path(directory) / library, module_name, True)
    except ImportError as exc:
        if not torch_free or "undefined symbol" not in str(exc):
            raise
        # A binding that reaches torch without its headers (declared by hand): link torch after all.
        commands["link"] = [*plan.cxx, *objects, *plan.ldflags, "-o", library]
        code, output, seconds = _run(commands["link"], directory)
        phases["link_s"] = round(phases["link_s"] + seconds, 3)
        phases["torch_libs"] = True
        if code != 0:
            raise RuntimeError(f"Error building extension '{module_name}': FAILED: link\n{output}") from None
        module = _import_library(Path(directory) / library, module_name, True)
    phases["import_s"] = round(time.perf_counter() - started, 3)
    return module


def _with_line_marker(sources: list[str], label: str) -> list[str]:
    """Prefix a `#line` directive so compiler errors give lines of the candidate's own string."""
    return [f'#line 1 "{label}"', *sources] if sources else sources


def cached_load_inline(
    name: str,
    cpp_sources: str | Sequence[str],
    cuda_sources: str | Sequence[str] | None = None,
    sycl_sources: str | Sequence[str] | None = None,
    functions: str | Sequence[str] | dict[str, str] | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_sycl_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    with_sycl: bool | None = None,
    is_python_module: bool = True,
    with_pytorch_error_handling: bool = True,
    keep_intermediates: bool = True,
    use_pch: bool = False,
    no_implicit_headers: bool = False,
    *,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    on_start: Callable[[str], None] | None = None,
    **other_options: Any,
) -> Any:
    """`load_inline` with a content-addressed cache; `build_directory` and `verbose` are ignored.

    The parameters mirror torch's, in torch's order. `verbose` is forced off because torch keeps the
    compiler output (our error evidence) only when it captures it. Options this torch does not know
    are dropped, so a program written for a newer torch (`no_implicit_headers`) still builds, slower.
    """
    del build_directory, verbose, keep_intermediates
    ce = cpp_extension()
    cpp = _as_list(cpp_sources)
    cuda = _as_list(cuda_sources)
    use_cuda = bool(cuda) if with_cuda is None else with_cuda
    flags = _effective_flags(
        _as_list(extra_cflags),
        _as_list(extra_cuda_cflags),
        _as_list(extra_ldflags),
        _as_list(extra_include_paths),
        use_cuda,
        arch,
        source_count=1 + (1 if cuda else 0),
    )
    accepted = _load_inline_parameters()
    options: dict[str, Any] = {
        "sycl_sources": sycl_sources,
        "extra_sycl_cflags": extra_sycl_cflags,
        "with_sycl": with_sycl,
        "with_pytorch_error_handling": with_pytorch_error_handling,
        "use_pch": use_pch,
        "no_implicit_headers": no_implicit_headers,
        **other_options,
    }
    options = {k: v for k, v in options.items() if k in accepted and v is not None}
    material = {
        "kind": "load_inline",
        "cpp_sources": cpp,
        "cuda_sources": cuda,
        "functions": functions,
        "cflags": flags.cflags,
        "cuda_cflags": flags.cuda_cflags,
        "ldflags": flags.ldflags,
        "include_paths": flags.include_paths,
        "with_cuda": with_cuda,
        "is_python_module": is_python_module,
        "options": options,
        "arch": arch if use_cuda else None,  # a C++-only build is the same binary for every arch
    }

    details: dict[str, Any] = {}
    direct = (
        builder_choice() == "direct"
        and is_python_module
        and not sycl_sources
        and not with_sycl
        and (with_cuda is None or with_cuda == bool(cuda))
        and not other_options
    )
    root = Path(cache_dir) if cache_dir else default_cache_dir()

    def build(directory: str, module_name: str) -> Any:
        marked_cpp = _with_line_marker(list(cpp), "cpp_sources")
        marked_cuda = _with_line_marker(list(cuda), "cuda_sources")
        if direct:
            main_cpp, cuda_cu = inline_sources(
                marked_cpp, marked_cuda, functions, with_pytorch_error_handling, no_implicit_headers
            )
            try:
                return direct_build(directory, module_name, main_cpp, cuda_cu, flags, pch_root(root), details)
            except _DirectUnavailable as why:
                details.clear()
                details["phases"] = {"direct_unavailable": str(why)}
        details["builder"] = "torch"
        return _ORIGINAL["load_inline"](
            name=module_name,
            cpp_sources=marked_cpp,
            cuda_sources=marked_cuda or None,
            functions=functions,
            extra_cflags=flags.cflags,
            extra_cuda_cflags=flags.cuda_cflags,
            extra_ldflags=flags.ldflags,
            extra_include_paths=flags.include_paths,
            build_directory=directory,
            verbose=False,
            with_cuda=with_cuda,
            is_python_module=is_python_module,
            **options,
        )

    _ORIGINAL.setdefault("load_inline", ce.load_inline)
    return cached_build(
        name,
        material,
        use_cuda,
        is_python_module,
        kernel_names(cuda),
        build,
        cache_dir,
        flags.env,
        on_start,
        details,
    )


def cached_load(
    name: str,
    sources: str | Sequence[str],
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_sycl_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    with_sycl: bool | None = None,
    is_python_module: bool = True,
    is_standalone: bool = False,
    keep_intermediates: bool = True,
    *,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    on_start: Callable[[str], None] | None = None,
    **other_options: Any,
) -> Any:
    """`load` (sources on disk) with the same cache; the key hashes the files' contents."""
    del build_directory, verbose, keep_intermediates
    if extra_sycl_cflags is not None or with_sycl:
        other_options.update(extra_sycl_cflags=extra_sycl_cflags, with_sycl=with_sycl)
    ce = cpp_extension()
    paths = [os.path.abspath(p) for p in _as_list(sources)]
    if is_standalone:  # an executable, not a module: nothing to import, nothing worth caching
        return _ORIGINAL.setdefault("load", ce.load)(name, paths, is_standalone=True, **other_options)
    try:
        contents = {p: Path(p).read_text(errors="replace") for p in paths}
    except OSError as exc:
        raise BuildError(name, [f"cannot read source: {exc}"], "", 0.0) from None
    cuda_texts = [text for p, text in contents.items() if p.endswith((".cu", ".cuh"))]
    use_cuda = bool(cuda_texts) if with_cuda is None else with_cuda
    flags = _effective_flags(
        _as_list(extra_cflags),
        _as_list(extra_cuda_cflags),
        _as_list(extra_ldflags),
        _as_list(extra_include_paths),
        use_cuda,
        arch,
        source_count=len(paths),
    )
    material = {
        "kind": "load",
        "sources": contents,
        "cflags": flags.cflags,
        "cuda_cflags": flags.cuda_cflags,
        "ldflags": flags.ldflags,
        "include_paths": flags.include_paths,
        "with_cuda": with_cuda,
        "is_python_module": is_python_module,
        "options": other_options,
        "arch": arch if use_cuda else None,
    }

    def build(directory: str, module_name: str) -> Any:
        return _ORIGINAL["load"](
            name=module_name,
            sources=paths,
            extra_cflags=flags.cflags,
            extra_cuda_cflags=flags.cuda_cflags,
            extra_ldflags=flags.ldflags,
            extra_include_paths=flags.include_paths,
            build_directory=directory,
            verbose=False,
            with_cuda=with_cuda,
            is_python_module=is_python_module,
            **other_options,
        )

    _ORIGINAL.setdefault("load", ce.load)
    return cached_build(
        name,
        material,
        use_cuda,
        is_python_module,
        kernel_names(cuda_texts),
        build,
        cache_dir,
        flags.env,
        on_start,
    )


_ORIGINAL: dict[str, Callable[..., Any]] = {}


@functools.cache
def _load_inline_parameters() -> frozenset[str]:
    import inspect

    return frozenset(
        inspect.signature(_ORIGINAL.get("load_inline") or cpp_extension().load_inline).parameters
    )


def install_cached_load_inline(
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    on_start: Callable[[str], None] | None = None,
) -> None:
    """Route this process's `load_inline` and `load` through the cache (the worker calls this).

    Programs do `from torch.utils.cpp_extension import load_inline` at import, so patching the
    module attribute before the program runs is enough; nothing outside this process changes.
    """
    ce = cpp_extension()
    _ORIGINAL.setdefault("load_inline", ce.load_inline)
    _ORIGINAL.setdefault("load", ce.load)
    ce.load_inline = functools.partial(cached_load_inline, arch=arch, cache_dir=cache_dir, on_start=on_start)
    ce.load = functools.partial(cached_load, arch=arch, cache_dir=cache_dir, on_start=on_start)


def prebuild(
    candidate_sources: Sequence[str],
    *,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    timeout_s: float = 600.0,
) -> list[dict[str, Any]]:
    """Build independent candidates' extensions at once, each in its own worker (action "build").

    Why: compiling is CPU work and candidates are untrusted code, so each one is executed in its own
    killable worker process; with the cache filled, their later verification only imports. Returns the
    workers' responses in input order (status "passed" when every extension built).
    """
    from concurrent.futures import ThreadPoolExecutor

    from tools.evaluate import evaluate  # the parent side; imported here to keep the worker's imports small

    root = str(Path(cache_dir) if cache_dir else default_cache_dir())
    workers = max(1, jobs or min(len(candidate_sources), _available_cpus()))

    def one(source: str) -> dict[str, Any]:
        request: dict[str, Any] = {"action": "build", "candidate_source": source, "cache_dir": root}
        if arch:
            request["arch"] = arch
        return dict(evaluate(request, timeout_s=timeout_s))  # type: ignore[arg-type]

    if not candidate_sources:
        return []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, candidate_sources))
