"""Reading a baseline answer (tools.baselines): the fastest compile mode and a candidate's speedups.

Why apart: both sides read answers (the baseline process names its best mode; the eval runner turns a
record's candidate time into speedups), and neither needs the measuring code to do it.
"""

from __future__ import annotations

from typing import Any

from tools.worker.compiled import COMPILE_MODES


def best_compile(baselines: dict[str, Any]) -> dict[str, Any] | None:
    """{"mode", "mean_ms"} of the fastest torch.compile mode that was measured, or None."""
    timed = [
        (entry["mean_ms"], mode)
        for mode, entry in baselines.items()
        if mode in COMPILE_MODES and isinstance(entry, dict) and entry.get("mean_ms")
    ]
    if not timed:
        return None
    ms, mode = min(timed)
    return {"mode": mode, "mean_ms": ms}


def speedups(candidate_ms: float | None, response: dict[str, Any]) -> dict[str, Any]:
    """The candidate against eager and the best compile mode of a baseline response."""
    baselines = response.get("baselines") or {}
    eager = (baselines.get("eager") or {}).get("mean_ms")
    best = response.get("best_compile") or best_compile(baselines)
    out: dict[str, Any] = {
        "baseline_eager_ms": eager,
        "best_compile_mode": best["mode"] if best else None,
        "best_compile_ms": best["mean_ms"] if best else None,
        "speedup_vs_eager": None,
        "speedup_vs_compile": None,
    }
    if candidate_ms and candidate_ms > 0:
        if eager:
            out["speedup_vs_eager"] = eager / candidate_ms
        if best:
            out["speedup_vs_compile"] = best["mean_ms"] / candidate_ms
    return out
