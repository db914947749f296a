"""Suite metrics over per-problem records, KernelBench-style.

Every rate is over *all* problems of a level: a missing or failed problem counts as failed, so a
system cannot look better by skipping the hard ones. fast_p is the share of problems that are
correct and more than p times faster than the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


def geomean(values: Iterable[float]) -> float | None:
    logs = [math.log(v) for v in values if v and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def mean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _correct(record: dict[str, Any]) -> bool:
    return record.get("status") == "verified"


def level_metrics(
    records: Sequence[dict[str, Any]], total: int, key: str = "speedup_vs_eager"
) -> dict[str, Any]:
    """Metrics of one level; `total` is the number of problems in it (missing ones count as failed)."""
    total = max(total, len(records))
    compiled = [r for r in records if r.get("built")]
    correct = [r for r in records if _correct(r)]
    speedups = [r[key] for r in correct if r.get(key)]
    out: dict[str, Any] = {
        "problems": total,
        "attempted": len(records),
        "compile_rate": len(compiled) / total if total else 0.0,
        "correctness_rate": len(correct) / total if total else 0.0,
        f"geomean_{key}": geomean(speedups),
        f"mean_{key}": mean(speedups),
    }
    for p in FAST_P:
        fast = [r for r in correct if (r.get(key) or 0.0) > p]
        out[f"fast_{p:g}"] = len(fast) / total if total else 0.0
    return out


def summarize(records: Sequence[dict[str, Any]], totals: dict[str, int]) -> dict[str, Any]:
    """Per-level and overall metrics; `totals` maps level -> problem count."""
    summary: dict[str, Any] = {"levels": {}}
    for level, total in sorted(totals.items()):
        rows = [r for r in records if r.get("level") == level]
        summary["levels"][level] = level_metrics(rows, total)
    summary["all"] = level_metrics(list(records), sum(totals.values()))
    return summary
