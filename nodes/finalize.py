"""Finalize node: pick the outcome, keep the best verified program, write the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from graph.context import Context
from graph.routers import budget_exhausted
from graph.state import State
from nodes.report import build_report, render_markdown
from nodes.timing import charged


def outcome(state: State, context: Context) -> tuple[str, str]:
    """(status, one-line reason): verified, unverified (built but not runnable here) or failed."""
    ended_early = state.get("status_reason") if state.get("status") == "failed" else None
    best = state.get("best")
    if best:
        reason = f"candidate {best['candidate']['id']} passed {best['test']['trials']} correctness trials"
        return "verified", reason + (f"; the run then stopped: {ended_early}" if ended_early else "")
    if ended_early:
        return "failed", ended_early
    test = state.get("test") or {}
    if test.get("status") == "no_gpu":
        return "unverified", test.get("message") or "built, but no CUDA device to run it"
    last = test.get("status") or state.get("coder_outcome") or "no candidate"
    spent = budget_exhausted(state, context)
    if spent is None and state.get("fix_streak", 0) >= context.max_fix_attempts:
        spent = f"{context.max_fix_attempts} fix attempts in a row failed"
    return "failed", f"no verified program; last outcome {last}" + (f"; {spent}" if spent else "")


def write_outputs(out_dir: str, state: State, report: dict[str, Any]) -> None:
    """solution.py (best verified, else the last program), report.json and report.md."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    program = (state.get("best") or {}).get("candidate") or state.get("candidate")
    if program:
        (out / "solution.py").write_text(program["source"])
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(report))


@charged
def finalize(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Close the run; the best verified candidate is what the run returns."""
    context = runtime.context
    status, reason = outcome(state, context)
    report = build_report(state, status, reason, context.policy)
    if context.out_dir:
        write_outputs(context.out_dir, state, report)
    return {
        "status": status,
        "status_reason": reason,
        "report": report,
        "log": [f"finalize: {status}: {reason}"],
    }
