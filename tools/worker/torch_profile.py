"""A per-forward summary of what the torch profiler saw: device time, launches, top kernels.

Why: the verifier's optimisation advice needs to know where a passing candidate spends its device
time, and in particular how much of it is in the candidate's own kernels rather than in PyTorch
calls it left in `forward`. Own kernels are recognised by name: the build records the `__global__`
function names parsed from the CUDA sources the candidate compiled. On a CPU-only run the same
summary covers CPU operators, and the "own" share is the time spent outside torch operators (the
candidate's extension calls plus Python glue), since pybind functions are not profiler events.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from tools.worker.inputs import clone_inputs
from tools.worker.kernel_names import base_name

TOP_K = 10  # kernels in a profile summary (the profile action's and the verifier's)

_TRANSFER_PREFIXES = ("Memcpy", "Memset", "memcpy", "memset")


def is_transfer(event: Any) -> bool:
    """A profiler device event that is a copy or memset rather than a kernel."""
    kind = getattr(event, "activity_type", None)
    if kind:
        return "memcpy" in kind.lower() or "memset" in kind.lower()
    return event.name.startswith(_TRANSFER_PREFIXES)


def is_device_work(event: Any) -> bool:
    """A profiler event for work on the GPU (kernel, copy, memset).

    `record_function` ranges also appear on the device timeline (`gpu_user_annotation`, device type
    CUDA) spanning the kernels inside them; counting them would double every device total and
    make a range look like a kernel launched by the program.
    """
    return event.device_type == DeviceType.CUDA and not getattr(event, "is_user_annotation", False)


def _top(per_name: dict[str, list[float]], total_us: float, top_k: int) -> list[dict[str, Any]]:
    rows = sorted(per_name.items(), key=lambda item: -sum(item[1]))[:top_k]
    return [
        {
            "name": name,
            "calls": len(durations),
            "total_ms": round(sum(durations) / 1000.0, 6),
            "share": round(sum(durations) / total_us, 4) if total_us > 0 else 0.0,
        }
        for name, durations in rows
    ]


def summarize_cuda(
    events: Sequence[Any], own_kernels: Collection[str], iters: int, top_k: int
) -> dict[str, Any]:
    """Device events (kernels, copies, memsets) per forward; own share by kernel name."""
    per_name: dict[str, list[float]] = defaultdict(list)
    launches = 0
    own_us = 0.0
    for event in events:
        if not is_device_work(event):
            continue
        duration = float(event.time_range.elapsed_us())
        per_name[event.name].append(duration)
        if not is_transfer(event):
            launches += 1
        if base_name(event.name) in own_kernels:
            own_us += duration
    total_us = sum(sum(d) for d in per_name.values())
    return {
        "source": "torch_profiler",
        "events": "cuda_kernels",
        "device_ms": round(total_us / 1000.0 / iters, 6),
        "kernel_count": round(launches / iters),
        "own_kernel_share": round(own_us / total_us, 4) if total_us > 0 else 0.0,
        "top": _top(per_name, total_us, top_k),
    }


def summarize_cpu(events: Sequence[Any], wall_us: float, own: bool, iters: int, top_k: int) -> dict[str, Any]:
    """CPU operators per forward; own share = wall time outside top-level torch ops (when `own`)."""
    per_name: dict[str, list[float]] = defaultdict(list)
    top_level_us = 0.0
    top_level_calls = 0
    for event in events:
        if event.device_type != DeviceType.CPU or event.name.startswith("["):
            continue
        per_name[event.name].append(float(event.self_cpu_time_total))
        if event.cpu_parent is None:
            top_level_us += float(event.time_range.elapsed_us())
            top_level_calls += 1
    outside = max(0.0, wall_us - top_level_us)
    return {
        "source": "torch_profiler",
        "events": "cpu_ops",
        "device_ms": round(wall_us / 1000.0 / iters, 6),
        "kernel_count": round(top_level_calls / iters),
        "own_kernel_share": round(outside / wall_us, 4) if own and wall_us > 0 else 0.0,
        "top": _top(per_name, wall_us, top_k),
    }


def profile_forward(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    device: torch.device | str,
    own_kernels: Collection[str] = (),
    warmup: int = 1,
    iters: int = 1,
    top_k: int = TOP_K,
    own_is_outside_ops: bool = True,
) -> dict[str, Any]:
    """Profile `iters` forwards after `warmup` and summarise one forward (ProfileInfo fields).

    own_is_outside_ops: on CPU, count time outside torch ops as the program's own (set False for a
    reference, which has no own kernels).
    """
    device = torch.device(device)
    on_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    with torch.no_grad():
        for _ in range(warmup):
            fn(*clone_inputs(inputs))
        batches = [clone_inputs(inputs) for _ in range(iters)]
        if on_cuda:
            torch.cuda.synchronize(device)  # neither the warm-up nor the copies may leak into the trace
        with profile(activities=activities) as prof:
            started = time.perf_counter()
            for args in batches:
                fn(*args)
            if on_cuda:
                torch.cuda.synchronize(device)
            wall_us = (time.perf_counter() - started) * 1e6
    events = list(prof.events())
    if on_cuda:
        return summarize_cuda(events, set(own_kernels), iters, top_k)
    return summarize_cpu(events, wall_us, own_is_outside_ops, iters, top_k)
