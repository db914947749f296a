"""The content-addressed build cache: one directory per key, built once under a lock, records per process.

Why: the same candidate is built again and again (re-verification, profiling, RL rollouts) and
torch's own JIT cache is keyed by the extension's name, per process. Here the key is a sha256 of
everything that shapes the binary; a build runs in a private temp directory and is renamed into
place only when it succeeded, while a per-key `fcntl` lock makes parallel builders of one key wait
for the first. Every call is recorded (`build_records()`): the worker reports seconds, cache hits
and the kernels a candidate compiled from them.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from tools.build.compiler_output import BuildError, clean_line, log_tail, parse_compiler_errors
from tools.build.toolchain import temporary_env, toolchain_fingerprint
from tools.cache_paths import CACHE_ENV as CACHE_ENV  # re-exported by tools.build
from tools.cache_paths import default_cache_dir as default_cache_dir
from tools.worker import timing_window

FORMAT_VERSION = 1  # bump when the layout of a cache entry changes
META_FILE = "stitch_build.json"


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


def cache_key(material: dict[str, Any]) -> str:
    """sha256 over a canonical JSON of everything that decides the binary."""
    blob = json.dumps({"format": FORMAT_VERSION, **material}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _library_file(directory: Path, module_name: str) -> Path:
    return directory / f"{module_name}.so"


def import_library(path: Path, module_name: str, is_python_module: bool) -> Any:
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
                        loaded = import_library(
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
                    # a compile is CPU work: never while something is being timed on this machine
                    with temporary_env(env or {}), timing_window.busy(root):
                        loaded = build(str(tmp), module_name)
                except Exception as exc:
                    output = str(exc)  # torch puts the captured compiler output into its message
                    errors = parse_compiler_errors(output, dirs) or [
                        f"{type(exc).__name__}: {clean_line(output.splitlines()[0] if output else '', dirs)}"
                    ]
                    tail = log_tail(output, dirs)
                    shutil.rmtree(tmp, ignore_errors=True)
                    record(False, False, errors, tail)
                    raise BuildError(name, errors, tail, time.perf_counter() - started) from None
                meta: dict[str, Any] = {
                    "name": name,
                    "module_name": module_name,
                    "key": key,
                    "kernels": kernels,
                }
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
