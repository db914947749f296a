"""The toolchain: torch's cpp_extension with a CUDA_HOME that has headers, arch flags, the flags a build gets.

Why: the cache key and the build itself must agree on every flag, so they come from one place:
the user's flags plus what this machine needs (the pip CUDA headers and libraries next to torch, the
target arch as both a -gencode flag and TORCH_CUDA_ARCH_LIST, MAX_JOBS). `toolchain_fingerprint`
names what besides the sources decides the binary (compilers, torch, Python ABI, machine).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from tools.process import available_cpus

_DOTTED_ARCH_RE = re.compile(r"(\d{1,2})\.(\d)([af]?)")  # TORCH_CUDA_ARCH_LIST style: 9.0, 10.0a
_NAMED_ARCH_RE = re.compile(r"(?:sm_|compute_)?(\d{2,3})([af]?)")  # sm_90, compute_100a, 90


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


@contextlib.contextmanager
def temporary_env(values: dict[str, str]) -> Iterator[None]:
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


def as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


@dataclass
class Flags:
    cflags: list[str]
    cuda_cflags: list[str]
    ldflags: list[str]
    include_paths: list[str]
    env: dict[str, str]


def effective_flags(
    cflags: list[str],
    cuda_cflags: list[str],
    ldflags: list[str],
    include_paths: list[str],
    with_cuda: bool,
    arch: str | None,
    source_count: int,
) -> Flags:
    """The user's flags plus what this machine needs: pip CUDA headers/libs, the arch, MAX_JOBS."""
    cflags, cuda_cflags, ldflags = list(cflags), list(cuda_cflags), list(ldflags)
    env = {}
    if "MAX_JOBS" not in os.environ:
        env["MAX_JOBS"] = str(max(1, min(available_cpus(), source_count)))
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
    return Flags(cflags, cuda_cflags, ldflags, list(include_paths), env)
