"""CPU pinning of a timing: the thread that issues the timed calls runs on chosen cores while it times.

Why: in strict timing every call follows a synchronisation, so the host's issue time is inside each
time. On an idle H100, three fresh processes timing the same eager forward differed by up to 3.2%, and
the shortest forwards most (docs/benchmarks.md, nineteenth session), while a placement shuffle inside
each process left that spread as it was. Where the scheduler put each process (a core of the GPU's
own NUMA node or another, a busy or an idle core) is the next suspect. Off by default until measured
(evals.device.placement_probe's `pinned` setting); a pinned time is another timing method in the
baseline cache's key.

$STITCHCUDA_TIMING_CPUS: unset or `off`, no pinning; `gpu`, the cores local to the GPU (its PCI
device's `local_cpulist` in sysfs); `gpu1`, the first of those; a list such as `2,4-6`, those cores.
Cores this process may not use are dropped; when none is left, or the sandbox hides sysfs or refuses
the call, the timing runs unpinned. Standard library only: the baseline cache's key reads the spec.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tools.worker.gpu_lock import pci_address

CPUS_ENV = "STITCHCUDA_TIMING_CPUS"
PCI_DEVICES = Path("/sys/bus/pci/devices")


def pinning_spec() -> str:
    """The pinning asked for ($STITCHCUDA_TIMING_CPUS, normalised; "" when off)."""
    spec = os.environ.get(CPUS_ENV, "").strip().lower()
    return "" if spec in ("", "off", "no", "false") else spec


def parse_cpulist(text: str) -> set[int]:
    """A kernel CPU list ("0-3,8,10-11") as a set; ValueError on anything else."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if first < 0 or last < first:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.update(range(first, last + 1))
    if not cpus:
        raise ValueError(f"empty CPU list {text!r}")
    return cpus


def gpu_local_cpus(pci_bus_id: str | None, root: Path = PCI_DEVICES) -> set[int] | None:
    """The cores of the GPU's NUMA node, from sysfs (None: unknown or unreadable)."""
    if not pci_bus_id:
        return None
    try:
        return parse_cpulist((root / pci_bus_id.lower() / "local_cpulist").read_text())
    except (OSError, ValueError):
        return None


def cpus_for(spec: str, pci_bus_id: str | None, root: Path = PCI_DEVICES) -> set[int] | None:
    """The cores a spec names, among those this process may use (None: no pinning)."""
    if not spec:
        return None
    if spec in ("gpu", "gpu1"):
        local = gpu_local_cpus(pci_bus_id, root)
        chosen = None if local is None else local & os.sched_getaffinity(0)
        if chosen and spec == "gpu1":
            chosen = {min(chosen)}
    else:
        try:
            chosen = parse_cpulist(spec) & os.sched_getaffinity(0)
        except ValueError:
            return None
    return chosen or None


@contextlib.contextmanager
def pinned(cpus: set[int] | None) -> Iterator[set[int] | None]:
    """While inside, the calling thread runs on `cpus` (yields them; None when it runs as before)."""
    if not cpus:
        yield None
        return
    try:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cpus)
    except OSError:  # a sandbox may refuse the call: time unpinned
        yield None
        return
    try:
        yield cpus
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, before)


def pci_bus_id(device: object) -> str | None:
    """The sysfs name ("0000:1b:00.0") of a torch CUDA device, when torch reports its PCI address."""
    import torch

    try:
        pci = pci_address(torch.cuda.get_device_properties(device))  # type: ignore[arg-type]
    except (RuntimeError, AssertionError):  # no such device
        return None
    return None if pci is None else "{:04x}:{:02x}:{:02x}.0".format(*pci)
