"""What a candidate must not change: precision pinned to fp32, and the harness's functions guarded.

Why: a candidate runs in the worker's process, so it could turn TF32 on, replace the CUDA event
timer, `torch.allclose` or `torch.cuda.synchronize`, or patch `time.perf_counter`. The worker pins
precision before the models are built and snapshots every guarded function (by identity) and
setting (by value); `check_guards` after import, construction and every call turns any change into
a runtime_error with a `patches_harness` finding.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from tools.protocol import finding
from tools.worker.reporting import Outcome


def _attr(path: str) -> Callable[[], Any]:
    """A getter for a dotted attribute (None when this torch lacks it)."""
    root, *parts = path.split(".")
    base = {"torch": torch, "time": time}[root]

    def get() -> Any:
        value: Any = base
        for part in parts:
            value = getattr(value, part, None)
            if value is None:
                return None
        return value

    return get


_GUARDED_FUNCTIONS = (
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.current_stream", "torch.cuda.empty_cache",
    "torch.cuda.Stream", "time.perf_counter", "time.perf_counter_ns", "time.time", "time.monotonic",
    "torch.allclose", "torch.isclose", "torch.equal", "torch.isfinite", "torch.nan_to_num", "torch.argmax",
    "torch.linalg.vector_norm", "torch.testing.assert_close", "torch.empty", "torch.Tensor",
    "torch.Tensor.__sub__", "torch.Tensor.__eq__", "torch.Tensor.abs", "torch.Tensor.to",
    "torch.Tensor.detach", "torch.Tensor.clone", "torch.Tensor.item", "torch.Tensor.max",
    "torch.Tensor.fill_", "torch.nn.Module.__call__", "torch.set_default_dtype",
)  # fmt: skip
_GUARDED_SETTINGS = (
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
    "torch.backends.cuda.matmul.fp32_precision", "torch.backends.cudnn.conv.fp32_precision",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "torch.backends.cudnn.benchmark", "torch.backends.cudnn.deterministic", "torch.backends.cudnn.enabled",
)  # fmt: skip
_GUARDED: dict[str, Callable[[], Any]] = {
    name: _attr(name) for name in _GUARDED_FUNCTIONS + _GUARDED_SETTINGS
}
_GUARDED["torch.get_float32_matmul_precision()"] = torch.get_float32_matmul_precision
_GUARDED["torch.get_default_dtype()"] = torch.get_default_dtype


def pin_precision() -> None:
    """fp32 means fp32: no TF32 in matmuls or convolutions, for the reference and the candidate."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def snapshot_guards() -> dict[str, Any]:
    return {name: get() for name, get in _GUARDED.items()}


def _changed(name: str, before: Any, now: Any) -> bool:
    """Functions and classes must be the very same objects; settings must keep their values."""
    if name in _GUARDED_SETTINGS or name.endswith("()"):
        return bool(now != before)
    return now is not before


def check_guards(snapshot: dict[str, Any]) -> None:
    changed = [name for name, get in _GUARDED.items() if _changed(name, snapshot[name], get())]
    if changed:
        what = ", ".join(changed)
        raise Outcome(
            "runtime_error",
            f"the candidate changed {what}; the harness's clocks, checks and precision settings must not be patched",
            [finding("patches_harness", "error", f"changed at run time: {what}")],
        )
