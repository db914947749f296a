"""The baseline cache: one JSON file of timed baselines, keyed by how and where they were taken.

Why: torch.compile baselines cost minutes per problem, and a baseline does not change unless the
GPU, torch, the problem or the timing method does. So every entry is keyed by (device name, torch
version, sha256 of the problem source, mode, timing method), where the timing method names the
timing code's own hash (tools.worker.timing and tools.worker.rounds), the warm-up, trial and round
counts, the precision, the seed and where inputs are drawn: a change to any of them measures again,
and the same file serves every later run and every machine of the same kind
(`$STITCHCUDA_BASELINE_CACHE` points several machines at one shared file). Writers take a file
lock and replace the file atomically, so concurrent baseline processes keep each other's entries.
Standard library only (the timing modules are read as bytes, not imported; the placement-shuffle
switch comes from tools.worker.timing_window, itself standard library only).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tools.cache_paths import default_cache_dir
from tools.worker.cpu_pinning import pinning_spec
from tools.worker.timing_window import SHUFFLE_ENV, shuffle_default  # noqa: F401  (stdlib only; SHUFFLE_ENV re-exported)

CACHE_FILE = "baselines.json"
CACHE_ENV = "STITCHCUDA_BASELINE_CACHE"  # a file, or a folder that holds baselines.json
DEFAULT_ROUNDS = 10  # tools.worker.rounds.DEFAULT_ROUNDS (checked by a test; no torch import here)
# How a time is taken: the timer, its rounds, and what keeps other work off the machine meanwhile
# (a cached time measured beside a worker's GPU work, before the device lock was shared, is stale).
_TIMING_CODE = (
    "worker/timing.py",
    "worker/rounds.py",
    "worker/gpu_lock.py",
    "worker/timing_window.py",
    "worker/cpu_pinning.py",
)


def problem_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def harness_mode(request: dict[str, Any]) -> str:
    """The worker's harness mode: 'kernelbench' (its default) or 'strict'; it picks the timing method."""
    return request.get("mode") or "kernelbench"


def inputs_on_device(request: dict[str, Any]) -> bool:
    """As the worker: KernelBench mode always draws inputs on the CPU; strict mode may draw on the GPU."""
    return harness_mode(request) == "strict" and bool(request.get("inputs_on_device", False))


def timing_rounds(request: dict[str, Any]) -> int:
    return max(1, int(request.get("timing_rounds", DEFAULT_ROUNDS)))


def timing_method(request: dict[str, Any]) -> str:
    """Everything about how a time was taken, as one string (part of the cache key)."""
    digest = hashlib.sha256()
    for name in _TIMING_CODE:
        digest.update((Path(__file__).parent / name).read_bytes())
    code = digest.hexdigest()[:12]
    pinning = pinning_spec()
    return (
        f"{harness_mode(request)}@{code}:warmup={int(request.get('warmup', 3))}"
        f":rounds={timing_rounds(request)}"
        f":trials={int(request.get('perf_trials', 100))}:precision={request.get('precision', 'fp32')}"
        f":seed={int(request.get('seed', 42))}:inputs={'device' if inputs_on_device(request) else 'host'}"
        ":grad=off" + (":shuffle=on" if shuffle_default() else "") + (f":cpus={pinning}" if pinning else "")
    )


def cache_key(device_name: str, torch_version: str, source_hash: str, mode: str, method: str) -> str:
    return "|".join((device_name, torch_version, source_hash, mode, method))


def cache_path(cache_dir: str | os.PathLike[str] | None) -> Path:
    """$STITCHCUDA_BASELINE_CACHE (a file, or a folder for baselines.json), else <build cache>/baselines.json."""
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        target = Path(env).expanduser()
        return target / CACHE_FILE if target.is_dir() or not target.suffix else target
    if cache_dir is None:
        cache_dir = default_cache_dir()
    return Path(cache_dir) / CACHE_FILE


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_cache(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def store(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Add one entry under the file lock (read, update, atomic replace): concurrent writers keep theirs."""
    with _locked(path):
        data = read_cache(path)
        data[key] = entry
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
