"""Where a problem's wall time went: trace, plan, build, correctness, timing, profile, baselines.

Why: the suite's throughput target (seconds per problem) is only actionable when each record says
which step ate the time. Everything comes from what the run already records: the planner's trace
time and per-node seconds (the report), the worker's phase seconds and build seconds per attempt,
the KernelBench-harness cross-check's phases (finalize), and the baseline process's wall time.
`wait_s` is the worker's wait for the device lock and the quiet window, and the baseline process's
wait for a GPU slot (time, not work: the scaling model leaves it out); what none of them covers
(process start-up, the graph's own work, coder turns) is `other_s`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tools.protocol import FIRST_CALL_PHASE, WAIT_PHASE, phase_seconds

STEPS: tuple[str, ...] = (
    "trace_s",
    "plan_s",
    "build_s",
    "correctness_s",
    "timing_s",
    "profile_s",
    "baselines_s",
    "wait_s",
    "other_s",
)

# worker phases (tools.worker: Progress phase names) by step
_PHASE_PREFIXES: dict[str, tuple[str, ...]] = {
    "correctness_s": ("checking correctness",),
    "timing_s": ("timing ", "drawing the timing inputs", FIRST_CALL_PHASE),
    "profile_s": ("profiling",),
    "wait_s": (WAIT_PHASE,),  # the device lock and the quiet window: time, not work
}


def _phase_seconds(attempts: Sequence[dict[str, Any]], prefixes: tuple[str, ...]) -> float:
    return sum(phase_seconds(attempt.get("phases"), prefixes) for attempt in attempts)


def breakdown(
    report: dict[str, Any] | None, baselines: dict[str, Any] | None, total_s: float
) -> dict[str, float]:
    """The per-step seconds of one problem (STEPS), rounded to 0.01 s; they add up to total_s."""
    report = report or {}
    attempts = list(report.get("attempts") or [])
    if isinstance(report.get("harness_check"), dict):  # the KernelBench-harness cross-check's worker run
        attempts.append(report["harness_check"])
    nodes = report.get("node_seconds") or {}
    steps = dict.fromkeys(STEPS, 0.0)
    steps["trace_s"] = float(report.get("trace_s") or 0.0)
    steps["plan_s"] = max(0.0, float(nodes.get("planner", 0.0)) - steps["trace_s"])
    steps["build_s"] = sum(float(a.get("build_seconds") or 0.0) for a in attempts)
    for step, prefixes in _PHASE_PREFIXES.items():
        steps[step] = _phase_seconds(attempts, prefixes)
    # the profiler node's own worker waits (the launch search's device lock and quiet window) are time
    profiler_wait = float(nodes.get("profiler_wait", 0.0))
    steps["profile_s"] += max(0.0, float(nodes.get("profiler", 0.0)) - profiler_wait)
    steps["wait_s"] += profiler_wait
    # the baseline process's wait for a GPU slot (tools.baselines) is time, not work: with the others
    slot_wait = float((baselines or {}).get("slot_wait_s") or 0.0)
    steps["baselines_s"] = max(0.0, float((baselines or {}).get("wall_s") or 0.0) - slot_wait)
    steps["wait_s"] += slot_wait
    steps["other_s"] = max(0.0, total_s - sum(v for k, v in steps.items() if k != "other_s"))
    return {k: round(v, 2) for k, v in steps.items()}


def breakdown_table(records: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of the per-problem breakdown, plus a total row and each step's share."""
    head = "| problem | " + " | ".join(s.removesuffix("_s") for s in STEPS) + " | total s |"
    lines = [head, "|" + "---|" * (len(STEPS) + 2)]
    totals = dict.fromkeys(STEPS, 0.0)
    grand = 0.0
    for record in sorted(records, key=lambda r: r["problem"]):
        steps = record.get("breakdown") or {}
        seconds = float(record.get("seconds") or 0.0)
        grand += seconds
        for step in STEPS:
            totals[step] += float(steps.get(step) or 0.0)
        cells = " | ".join(f"{float(steps.get(s) or 0.0):.1f}" for s in STEPS)
        lines.append(f"| {record['problem']} | {cells} | {seconds:.1f} |")
    share = " | ".join(f"{totals[s]:.0f} ({totals[s] / grand:.0%})" if grand else "-" for s in STEPS)
    lines.append(f"| **all {len(records)}** | {share} | {grand:.0f} |")
    return "\n".join(lines) + "\n"
