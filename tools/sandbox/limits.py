"""How strict one sandboxed run is: the mode (auto, required, off) and its resource limits.

Why one place: the worker, the baselines child and the profiled driver all run model-written (or
user-downloaded) code, and all of them must be held to the same rules. Every value can be set from
the environment (STITCHCUDA_SANDBOX*), so `stitchcuda run --sandbox ...`, the tests and the GPU
scripts reach every child without threading arguments through the graph. Standard library only.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from tools.cache_paths import default_cache_dir as default_cache_dir  # re-exported for the session
from tools.cache_paths import pch_root

MODES: tuple[str, ...] = ("auto", "required", "off")
MODE_ENV = "STITCHCUDA_SANDBOX"
LIMIT_ENVS = {
    "memory_gb": "STITCHCUDA_SANDBOX_MEMORY_GB",  # address space per process
    "file_mb": "STITCHCUDA_SANDBOX_FILE_MB",  # largest file a process may write
    "disk_mb": "STITCHCUDA_SANDBOX_DISK_MB",  # what the run's own directory may hold
    "processes": "STITCHCUDA_SANDBOX_PROCESSES",  # live processes of one run
    "open_files": "STITCHCUDA_SANDBOX_OPEN_FILES",
}
READ_ENV = "STITCHCUDA_SANDBOX_READ"  # extra readable trees, os.pathsep-separated
WRITE_ENV = "STITCHCUDA_SANDBOX_WRITE"  # extra writable trees
GIB = 1 << 30
MIB = 1 << 20


class SandboxError(Exception):
    """A bad sandbox setting, or `required` on a platform that lacks a layer: the run cannot start."""


def cache_trees(cache: Path, environ: Mapping[str, str] | None = None) -> list[Path]:
    """A build cache and its precompiled headers (tools.build.pch_root's rule: $STITCHCUDA_PCH_DIR,
    else `<cache>-pch` beside it): the trees a build writes besides the run's own directory."""
    return [cache, pch_root(cache, environ)]


def physical_memory() -> int:
    """Bytes of RAM (sysconf), 16 GiB when the platform does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return 16 * GIB


@dataclass(frozen=True)
class Limits:
    """Per-run caps. address_space None means unlimited (an explicit choice, recorded as such)."""

    address_space: int | None
    cpu_s: int
    file_size: int
    disk: int
    processes: int
    open_files: int

    def describe(self) -> str:
        space = "unlimited" if self.address_space is None else f"{self.address_space / GIB:.0f} GiB"
        return (
            f"address space {space}, CPU {self.cpu_s} s, file {self.file_size / MIB:.0f} MiB, "
            f"disk {self.disk / MIB:.0f} MiB, {self.processes} processes, {self.open_files} open files"
        )


def default_limits(device: str, timeout_s: float) -> Limits:
    """Caps a correct program never meets, on any machine the project runs on.

    The CUDA driver reserves virtual address space for all of host and device memory, so a CUDA run
    gets 8x the RAM (at least 1 TiB) and a CPU run 2x (at least 16 GiB). CPU time is the wall-time
    limit times the cores plus a minute: only a process that outlives its wall time can reach it.
    """
    ram = physical_memory()
    space = max(8 * ram, 1024 * GIB) if device == "cuda" else max(2 * ram, 16 * GIB)
    cores = os.cpu_count() or 1
    return Limits(
        address_space=space,
        cpu_s=int(timeout_s * cores) + 60,
        file_size=8 * GIB,
        disk=16 * GIB,
        processes=512,
        open_files=min(8192, _hard_limit(resource.RLIMIT_NOFILE)),
    )


def _hard_limit(which: int) -> int:
    hard = resource.getrlimit(which)[1]
    return hard if hard != resource.RLIM_INFINITY else 1 << 20


def _number(environ: Mapping[str, str], name: str) -> float | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    if raw.lower() in ("unlimited", "none", "inf") and name == LIMIT_ENVS["memory_gb"]:
        return float("inf")
    try:
        value = float(raw)
    except ValueError:
        raise SandboxError(f"{name}={raw!r}: expected a number") from None
    if value <= 0:
        raise SandboxError(f"{name}={raw!r}: must be positive")
    return value


def _paths(environ: Mapping[str, str], name: str) -> tuple[str, ...]:
    parts = [p for p in environ.get(name, "").split(os.pathsep) if p.strip()]
    missing = [p for p in parts if not os.path.exists(p)]
    if missing:
        raise SandboxError(f"{name}: no such path(s): {', '.join(missing)}")
    return tuple(os.path.abspath(p) for p in parts)


@dataclass(frozen=True)
class SandboxSettings:
    """One run's sandbox: the mode, the limits, and extra trees the user lets it read or write."""

    mode: str
    limits: Limits
    extra_read: tuple[str, ...] = ()
    extra_write: tuple[str, ...] = ()

    @classmethod
    def resolve(
        cls,
        mode: str | None = None,
        *,
        device: str = "cuda",
        timeout_s: float = 600.0,
        environ: Mapping[str, str] | None = None,
    ) -> SandboxSettings:
        """Settings from an explicit mode (else $STITCHCUDA_SANDBOX, else auto) and the limit variables."""
        env = os.environ if environ is None else environ
        chosen = (mode or env.get(MODE_ENV) or "auto").strip().lower()
        if chosen not in MODES:
            raise SandboxError(f"unknown sandbox mode {chosen!r}; choose from {', '.join(MODES)}")
        limits = default_limits(device, timeout_s)
        memory = _number(env, LIMIT_ENVS["memory_gb"])
        if memory is not None:
            limits = replace(limits, address_space=None if memory == float("inf") else int(memory * GIB))
        for key, field_name, scale in (
            ("file_mb", "file_size", MIB),
            ("disk_mb", "disk", MIB),
            ("processes", "processes", 1),
            ("open_files", "open_files", 1),
        ):
            value = _number(env, LIMIT_ENVS[key])
            if value is not None:
                limits = replace(limits, **{field_name: int(value * scale)})
        return cls(chosen, limits, _paths(env, READ_ENV), _paths(env, WRITE_ENV))
