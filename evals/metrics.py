"""Suite metrics over per-problem records, KernelBench-style (docs/kernelbench.md §2).

Every rate is over *all* problems of a level: a missing or failed problem counts as failed, so a
system cannot look better by skipping the hard ones. A problem is correct when its run verified a
program and the hack checker did not call it "hacked"; hacked programs count in `hacking_rate` and
never as correct or fast. fast_p is the share of all problems that are correct with a speedup
strictly greater than p (so fast_0 is the share correct *and timed*); it is computed against eager
and against the best torch.compile mode. Mean speedups (geometric and arithmetic) are over the
correct, timed problems. A comparison nobody measured (no compile baselines in the whole level)
reports None instead of zeros.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile")  # record keys speedup_vs_eager, speedup_vs_compile


def geomean(values: Iterable[float | None]) -> float | None:
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def p_label(p: float) -> str:
    """The key of a fast_p threshold: 0, 0.5, 0.8, 1, 1.5, 2."""
    return f"{p:g}"


def is_hacked(record: dict[str, Any]) -> bool:
    return record.get("verdict") == "hacked"


def is_correct(record: dict[str, Any]) -> bool:
    return record.get("status") == "verified" and not is_hacked(record)


def is_compiled(record: dict[str, Any]) -> bool:
    return bool(record.get("built"))


def _speedup(record: dict[str, Any], baseline: str) -> float | None:
    value = record.get(f"speedup_vs_{baseline}")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) and value > 0 else None


def speedup_of(record: dict[str, Any], baseline: str) -> float | None:
    """The record's finite, positive speedup against "eager" or "compile", else None."""
    return _speedup(record, baseline)


def fast_share(records: Sequence[dict[str, Any]], total: int, baseline: str, p: float) -> float:
    """fast_p at any p: the share of `total` problems that are correct with a speedup strictly above p."""
    fast = sum(1 for r in records if is_correct(r) and (_speedup(r, baseline) or 0.0) > p)
    return fast / total if total else 0.0


def comparison(records: Sequence[dict[str, Any]], total: int, baseline: str) -> dict[str, Any]:
    """Speedup metrics against one baseline ("eager" or "compile") over `total` problems."""
    correct = [r for r in records if is_correct(r)]
    speedups = [s for s in (_speedup(r, baseline) for r in correct) if s is not None]
    measured = any(_speedup(r, baseline) is not None for r in records)
    out: dict[str, Any] = {
        "timed": len(speedups),
        "geomean_speedup": geomean(speedups),
        "mean_speedup": mean(speedups),
        "fast_p": {},
    }
    for p in FAST_P:
        fast = sum(1 for s in speedups if s > p)
        out["fast_p"][p_label(p)] = (fast / total if total else 0.0) if measured else None
    return out


def level_metrics(records: Sequence[dict[str, Any]], total: int) -> dict[str, Any]:
    """Metrics of one level; `total` is its number of problems (missing ones count as failed)."""
    total = max(total, len(records))
    counts = {
        "compiled": sum(1 for r in records if is_compiled(r)),
        "correct": sum(1 for r in records if is_correct(r)),
        "hacked": sum(1 for r in records if is_hacked(r)),
    }
    out: dict[str, Any] = {"problems": total, "attempted": len(records), **counts}
    out["compile_rate"] = counts["compiled"] / total if total else 0.0
    out["correctness_rate"] = counts["correct"] / total if total else 0.0
    out["hacking_rate"] = counts["hacked"] / total if total else 0.0
    for baseline in BASELINES:
        out[f"vs_{baseline}"] = comparison(records, total, baseline)
    out["compile_partial"] = sum(1 for r in records if compile_partial(r))
    return out


def compile_partial(record: dict[str, Any]) -> bool:
    """Whether the record's best compile mode is the best of fewer modes than were asked for (a mode
    failed, e.g. out of GPU memory): its speedup over compile is then an upper bound."""
    errors = record.get("baseline_errors") or {}
    return record.get("speedup_vs_compile") is not None and any(mode != "eager" for mode in errors)


def summarize(records: Sequence[dict[str, Any]], totals: dict[str, int]) -> dict[str, Any]:
    """Per-level and overall metrics; `totals` maps level -> problem count."""
    summary: dict[str, Any] = {"levels": {}}
    for level, total in sorted(totals.items()):
        rows = [r for r in records if r.get("level") == level]
        summary["levels"][level] = level_metrics(rows, total)
    known = [r for r in records if r.get("level") in totals]
    summary["all"] = level_metrics(known, sum(totals.values()))
    return summary


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def summary_table(summary: dict[str, Any]) -> str:
    """The per-level summary as a Markdown table (also what the terminal shows)."""
    labels = [p_label(p) for p in FAST_P]
    head = (
        "| level | problems | compiled | correct | hacked | vs | geomean | mean | "
        + " | ".join(f"fast_{p}" for p in labels)
        + " |"
    )
    lines = [head, "|" + "---|" * (8 + len(labels))]
    rows = [*summary["levels"].items(), ("all", summary["all"])]
    for level, m in rows:
        for baseline in BASELINES:
            c = m[f"vs_{baseline}"]
            first = baseline == BASELINES[0]
            lead = (
                f"| {level} | {m['problems']} | {_pct(m['compile_rate'])} | {_pct(m['correctness_rate'])} | "
                f"{_pct(m['hacking_rate'])} |"
                if first
                else "| | | | | |"
            )
            fast = " | ".join(_pct(c["fast_p"][p]) for p in labels)
            lines.append(
                f"{lead} {baseline} | {_x(c['geomean_speedup'])} | {_x(c['mean_speedup'])} | {fast} |"
            )
    partial = summary["all"].get("compile_partial", 0)
    if partial:
        lines.append(
            f"\nvs compile: {partial} problem(s) had a torch.compile mode fail (baseline_errors), so their "
            "best compile mode is the best of fewer modes and their speedup over compile an upper bound."
        )
    return "\n".join(lines)
