"""An exclusive, crash-safe lock per physical device, so concurrent workers never measure on top of each other.

Why flock: many workers may build at once (builds are CPU work and run unlocked), but correctness,
timing and profiling on one device must not overlap or the numbers are meaningless. The kernel
drops an flock when its holder dies, so a killed worker cannot leave a stale lock behind.

Why per physical GPU: on a node with several GPUs, work on different GPUs does not disturb each
other's device, so each GPU has its own lock file, named by the GPU's UUID as CUDA reports it. The
UUID is the same whatever CUDA_VISIBLE_DEVICES made of the device's index: a worker that sees GPU 3
as `cuda:0` and one that sees it as `cuda:3` take the same lock. (Timing also needs a quiet CPU,
which is machine-wide: that is tools.worker.timing_window, taken inside this lock.) torch only, and
only when a CUDA device is named: the worker island imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tools.cache_paths import default_cache_dir

MACHINE_GPU_LOCK = "gpu.lock"  # when the device's UUID cannot be read: every GPU of the machine takes turns
SLOT_POLL_S = 0.25  # how often a process waiting for a slot tries them again


def device_key(device: Any) -> str:
    """The lock's name for a device: 'cpu', or 'gpu-<uuid>' for a CUDA device ('cuda' alone: the current one).

    Falls back to the PCI address, then to 'gpu' (one lock for the whole machine, the safe side) when
    CUDA cannot say which physical device it is.
    """
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    try:
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
    except Exception:  # noqa: BLE001 - no usable CUDA here: the machine-wide lock
        return "gpu"
    uuid = _slug(str(getattr(props, "uuid", "") or ""))
    if uuid:
        return f"gpu-{uuid}"
    pci = pci_address(props)
    if pci is not None:
        return "gpu-pci-{:04x}-{:02x}-{:02x}".format(*pci)
    return "gpu"


def pci_address(props: Any) -> tuple[int, int, int] | None:
    """(domain, bus, slot) from torch's device properties, when this torch reports them."""
    domain, bus, slot = (
        getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")
    )
    if isinstance(domain, int) and isinstance(bus, int) and isinstance(slot, int):
        return domain, bus, slot
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9-]+", "-", text).strip("-")


def lock_path(cache_dir: str | os.PathLike[str] | None, device: Any) -> Path:
    """<cache>/gpu-<uuid>.lock for a CUDA device (one per physical GPU), <cache>/cpu.lock for the CPU.

    `cache_dir`: the build cache root (None: the default one), which every worker, baseline process
    and profiler of the machine shares; a lock anywhere else would not exclude them.
    `device`: a torch.device or its name ("cuda" means the current CUDA device, "cuda:1" that index
    as this process sees it).
    """
    key = device_key(device)
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    return root / (MACHINE_GPU_LOCK if key == "gpu" else f"{key}.lock")


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


@contextlib.contextmanager
def slot(path: str | os.PathLike[str], count: int) -> Iterator[float]:
    """Hold one of `count` slots beside the lock `path` (files `<path>.slot<i>`); yields the wait.

    Why: some work keeps GPU memory for minutes outside the exclusive lock (a baseline process holds
    its model and inputs through every torch.compile mode's compilation). With a
    dozen such processes a GPU runs out of memory; slots bound how many hold memory at once while
    the rest wait. Non-blocking tries in a loop, so whichever slot frees first is taken.
    """
    if count < 1:
        raise ValueError(f"a slot needs count >= 1, got {count}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    handles = [open(path.with_name(f"{path.name}.slot{i}"), "a") for i in range(count)]  # noqa: SIM115
    try:
        while not _take_a_free_one(handles):
            time.sleep(SLOT_POLL_S)
        yield time.perf_counter() - started
    finally:
        for handle in handles:
            handle.close()  # closing drops the held flock


def _take_a_free_one(handles: list[Any]) -> bool:
    """Lock the first of `handles` nobody holds (without waiting); whether one was free."""
    for handle in handles:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        return True
    return False
