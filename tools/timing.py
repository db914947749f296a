"""Timing a model's forward the way KernelBench does: CUDA events, cold L2, mean of the trials.

Why this shape: numbers must be comparable with KernelBench's (3 warm-ups, then per call: device
synchronize, overwrite a 256 MB buffer so L2 is cold, record an event on the current stream, call,
record, synchronize; the mean is the headline). The clock functions are bound when this module is
imported, before any candidate runs, so a candidate that replaces `torch.cuda.Event.record`,
`elapsed_time`, `torch.cuda.synchronize` or `time.perf_counter` does not change what we measure
(the worker also reports such replacements). Every call gets fresh clones of the inputs, so a
candidate cannot cache its answer by input pointer across timed calls or mutate the next call's
inputs.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from tools.correctness import clone_inputs

L2_FLUSH_BYTES = 256 * 1024 * 1024

_perf_counter = time.perf_counter
_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed_time = torch.cuda.Event.elapsed_time
_current_stream = torch.cuda.current_stream


def timing_stats(times_ms: Sequence[float]) -> dict[str, float | int]:
    """mean (the headline), median, population std, min, max, trials."""
    if not times_ms:
        raise ValueError("no timings to summarise")
    return {
        "mean_ms": round(statistics.fmean(times_ms), 6),
        "median_ms": round(statistics.median(times_ms), 6),
        "std_ms": round(statistics.pstdev(times_ms), 6),
        "min_ms": round(min(times_ms), 6),
        "max_ms": round(max(times_ms), 6),
        "trials": len(times_ms),
    }


def _affordable_trials(trials: int, per_call_s: float, budget_s: float | None) -> int:
    """Fewer trials when the wall-time budget cannot hold them all (at least 1)."""
    if budget_s is None or per_call_s <= 0:
        return trials
    return max(1, min(trials, math.floor(budget_s / per_call_s)))


def _time_cuda(
    fn: Callable[..., Any], inputs: Sequence[Any], device: torch.device, trials: int, budget_s: float | None
) -> list[float]:
    flush = torch.empty(L2_FLUSH_BYTES // 8, dtype=torch.int64, device=device)
    stream = _current_stream(device)
    times: list[float] = []
    started = _perf_counter()
    for i in range(trials):
        args = clone_inputs(inputs)
        _synchronize(device)
        flush.fill_(i)
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _record(start, stream)
        fn(*args)
        _record(end, stream)
        _synchronize(device)
        times.append(_elapsed_time(start, end))
        if i == 0:
            trials = _affordable_trials(trials, _perf_counter() - started, budget_s)
        if len(times) >= trials:
            break
    return times


def _time_cpu(
    fn: Callable[..., Any], inputs: Sequence[Any], trials: int, budget_s: float | None
) -> list[float]:
    times: list[float] = []
    started = _perf_counter()
    for i in range(trials):
        args = clone_inputs(inputs)
        t0 = _perf_counter()
        fn(*args)
        times.append((_perf_counter() - t0) * 1000.0)
        if i == 0:
            trials = _affordable_trials(trials, _perf_counter() - started, budget_s)
        if len(times) >= trials:
            break
    return times


def time_forward(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    device: torch.device | str,
    warmup: int = 3,
    trials: int = 100,
    budget_s: float | None = None,
) -> dict[str, float | int]:
    """Timing stats (ms) of `fn(*inputs)` under no_grad; CUDA events on GPU, perf_counter on CPU.

    budget_s bounds the timed loop's wall time: after the first timed call the trial count is cut to
    what fits (the stats say how many ran).
    """
    device = torch.device(device)
    if trials < 1:
        raise ValueError(f"perf trials must be >= 1, got {trials}")
    with torch.no_grad():
        for _ in range(warmup):
            fn(*clone_inputs(inputs))
        if device.type == "cuda":
            _synchronize(device)
            times = _time_cuda(fn, inputs, device, trials, budget_s)
        else:
            times = _time_cpu(fn, inputs, trials, budget_s)
    return timing_stats(times)
