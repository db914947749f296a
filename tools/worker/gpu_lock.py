"""An exclusive, crash-safe lock around measurements, so concurrent workers never time each other.

Why flock: many workers may build at once (builds are CPU work and run unlocked), but correctness,
timing and profiling on one device must not overlap or the numbers are meaningless. The kernel
drops an flock when its holder dies, so a killed worker cannot leave a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path


def lock_path(cache_dir: str | os.PathLike[str], device: str) -> Path:
    """<cache>/gpu.lock for CUDA runs, <cache>/cpu.lock for CPU runs."""
    return Path(cache_dir) / ("gpu.lock" if device == "cuda" else f"{device}.lock")


@contextlib.contextmanager
def exclusive(path: str | os.PathLike[str]) -> Iterator[float]:
    """Hold an exclusive flock on `path` (created if missing); yields the seconds spent waiting."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - started
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
