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

CACHE_ENV = "STITCHCUDA_CACHE"
FORMAT_VERSION = 1  # bump when the layout of a cache entry changes
META_FILE = "stitch_build.json"
MAX_ERRORS = 10
LOG_TAIL_CHARS = 4000

_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d)\.?(\d{1,2})([af]?)$")
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
    """'sm_90' / 'compute_90a' / '90' / '9.0' -> ('90', 'a'); raises ValueError for anything else."""
    match = _ARCH_RE.match(arch.strip())
    if not match:
        raise ValueError(f"unknown CUDA arch {arch!r}; expected e.g. sm_90, sm_90a or 9.0")
    major, minor, suffix = match.groups()
    return f"{major}{minor}", suffix


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


_GLOBAL_RE = re.compile(r"__global__")
_CALL_NAME_RE = re.compile(r"([A-Za-z_]\w*)\s*\(")
_NOT_A_KERNEL_NAME = {
    "__launch_bounds__",
    "__cluster_dims__",
    "__maxnreg__",
    "__align__",
    "alignas",
    "__declspec",
}


def kernel_names(sources: Sequence[str]) -> list[str]:
    """Names of the `__global__` functions defined in CUDA sources (templates included)."""
    names: list[str] = []
    for src in sources:
        for hit in _GLOBAL_RE.finditer(src):
            for m in _CALL_NAME_RE.finditer(src, hit.end(), min(len(src), hit.end() + 400)):
                if m.group(1) not in _NOT_A_KERNEL_NAME:
                    if m.group(1) not in names:
                        names.append(m.group(1))
                    break
    return names


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
) -> Any:
    """Return the module for `material`, building it with `build(tmp_dir, module_name)` on a miss."""
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

    def build(directory: str, module_name: str) -> Any:
        return _ORIGINAL["load_inline"](
            name=module_name,
            cpp_sources=_with_line_marker(list(cpp), "cpp_sources"),
            cuda_sources=_with_line_marker(list(cuda), "cuda_sources") or None,
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
        name, material, use_cuda, is_python_module, kernel_names(cuda), build, cache_dir, flags.env, on_start
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
