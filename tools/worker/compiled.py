"""torch.compile baselines, compiled and warmed up so they can be timed beside the candidate and eager.

Why one module: the baseline step (tools.baselines) and the worker (tools.worker.verify, when a
request asks for compile modes) both time torch.compile modes, and both must keep compilation out of
the numbers and out of the quiet window. Each mode first runs COMPILE_WARMUP untimed calls
(compiling, autotuning, recording CUDA graphs) in the shared timing window (tools.worker.timing_window);
only the timed calls that follow hold the quiet one. Torch and the standard library only.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from tools.worker import timing_window
from tools.worker.inputs import clone_inputs

COMPILE_MODES: tuple[str, ...] = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
# Modes whose compilation times candidate kernels on the GPU (its autotuning): a baseline process
# compiles them holding the device's lock, so no other process's GPU work skews what they pick.
AUTOTUNING_MODES = frozenset({"max-autotune", "max-autotune-no-cudagraphs"})
COMPILE_WARMUP = 3  # untimed calls that absorb compilation, autotuning and CUDA-graph recording


def max_abs_diff(ref: Any, new: Any) -> float | None:
    """The largest elementwise difference of two outputs (tensors or sequences of them), None if unknown."""
    if isinstance(ref, torch.Tensor) and isinstance(new, torch.Tensor):
        if ref.shape != new.shape:
            return math.inf
        if ref.numel() == 0:
            return 0.0
        return float((ref.double() - new.double()).abs().max().item())
    if isinstance(ref, list | tuple) and isinstance(new, list | tuple) and len(ref) == len(new):
        diffs = [max_abs_diff(a, b) for a, b in zip(ref, new, strict=True)]
        known = [d for d in diffs if d is not None]
        return max(known) if known else None
    return None


def compile_mode(
    mode: str,
    model: torch.nn.Module,
    inputs: list[Any],
    device: torch.device,
    reference_output: Any = None,
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    reset: bool = True,
) -> tuple[Callable[..., Any], dict[str, Any]]:
    """torch.compile `model` in `mode` and run the untimed calls that absorb compilation.

    Runs inside the shared timing window (CPU work: it waits for any timing on this machine, and
    no timing starts while it compiles). The returned function calls the compiled model under
    no_grad (inference graphs, as KernelBench times its baselines); with it comes the entry so far
    (mode, compile_s, max_abs_diff_vs_eager when reference_output is given). reset: forget every
    earlier compilation first (off when several modes must stay usable at once).
    """
    if mode not in COMPILE_MODES:
        raise ValueError(f"unknown torch.compile mode {mode!r} (choose from {', '.join(COMPILE_MODES)})")
    if reset:
        torch._dynamo.reset()
    compiled = torch.compile(model, mode=mode)

    def fn(*args: Any) -> Any:
        with torch.no_grad():
            return compiled(*args)

    entry: dict[str, Any] = {"mode": mode}
    started = time.perf_counter()
    with timing_window.busy(cache_dir):  # no_grad, as the timed calls: they hit this graph
        output = None
        for _ in range(COMPILE_WARMUP):
            output = fn(*clone_inputs(inputs))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    entry["compile_s"] = round(time.perf_counter() - started, 3)
    if reference_output is not None:
        entry["max_abs_diff_vs_eager"] = max_abs_diff(reference_output, output)
    del output
    return fn, entry
