"""Finalize node: pick the outcome, keep the best verified program, write the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from graph.artifacts import Best, Candidate, Task, TestResult
from graph.context import Context
from graph.routers import budget_exhausted
from graph.state import State, read, read_optional
from nodes.support.budget import charged
from nodes.support.report import build_report, render_markdown
from nodes.support.run_summary import kernel_roofline, profile_report
from nodes.support.turn_log import TurnLog
from nodes.support.worker_client import kernelbench_cross_check


def stop_reason(state: State, context: Context) -> str:
    """Why the loop ended, in one phrase."""
    spent = budget_exhausted(state, context)
    if spent:
        return spent
    if state.get("fix_streak", 0) >= context.max_fix_attempts:
        return f"{context.max_fix_attempts} fix attempts in a row failed"
    if state.get("coder_outcome") == "unchanged":
        return "the optimiser had nothing more to try"
    gain = state.get("last_gain")
    if gain is not None and gain < context.min_gain:
        return f"the last optimisation gained {gain:+.1%} (< {context.min_gain:.0%})"
    if state.get("optimize_rounds", 0) >= context.max_optimize_rounds:
        return f"{context.max_optimize_rounds} optimisation rounds done"
    return "the loop ended"


def outcome(state: State, context: Context) -> tuple[str, str]:
    """(status, one-line reason): verified, unverified (built but not runnable here) or failed."""
    ended_early = state.get("status_reason") if state.get("status") == "failed" else None
    stopped = ended_early or stop_reason(state, context)
    best = read_optional(state, "best", Best)
    if best is not None:
        passed = f"candidate {best.candidate.id} passed {best.test.trials} correctness trials"
        return "verified", f"{passed}; stopped: {stopped}"
    if ended_early:
        return "failed", ended_early
    test = read_optional(state, "test", TestResult)
    if test is not None and test.status == "no_gpu":
        return "unverified", test.message or "built, but no CUDA device to run it"
    last = (test.status if test is not None else None) or state.get("coder_outcome") or "no candidate"
    return "failed", f"no verified program; last outcome {last}; {stopped}"


def write_outputs(out_dir: str, state: State, report: dict[str, Any]) -> None:
    """solution.py (best verified, else the last program), report.json, report.md and its HTML twin."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report["kernel_roofline"] = kernel_roofline(profile_report(out, report.get("candidate_id")))
    best = read_optional(state, "best", Best)
    program = best.candidate if best is not None else read_optional(state, "candidate", Candidate)
    if program is not None:
        (out / "solution.py").write_text(program.source)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(report))
    write_html_twin(out)


def write_html_twin(out: Path) -> None:
    """report.html with its plots, when matplotlib (the `report` extra) is installed; never fails the run."""
    try:
        from evals.report.run_page import write_run_page
    except ImportError:
        return
    try:
        write_run_page(out)
    except Exception as exc:  # noqa: BLE001 - a plotting failure must not lose the run's outputs
        (out / "report.html.error.txt").write_text(f"{type(exc).__name__}: {exc}\n")


def cross_checked(state: State, context: Context) -> Best | None:
    """The best program with KernelBench's verdict on it, or None when there is nothing to add.

    Once per run, on the program the run returns (strict mode, `kernelbench_check` on): each check
    is a worker run that holds the GPU for KernelBench's CPU-drawn trials (about 20 s for a 2 GB
    input), so checking every new best inside the loop cost more device time than the loop's own
    verification (docs/timing.md, "Where the device time goes").
    """
    best = read_optional(state, "best", Best)
    if best is None or context.tolerance_mode != "strict" or not context.kernelbench_check:
        return None
    if best.test.kernelbench is not None:
        return None
    check = kernelbench_cross_check(read(state, "task", Task), best.candidate, context)
    return best.model_copy(update={"test": best.test.model_copy(update={"kernelbench": check})})


@charged
def finalize(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Close the run; the best verified candidate is what the run returns."""
    context = runtime.context
    checked = cross_checked(state, context)
    if checked is not None:
        state = {**state, "best": checked.dump()}  # type: ignore[typeddict-item]
    status, reason = outcome(state, context)
    report = build_report(state, status, reason, context.policy, sandbox=context.sandbox)
    turns = TurnLog(context)
    turns.outcome(state)  # the last candidate's result; no coder turn follows it
    best = read_optional(state, "best", Best)
    turns.finished(status, reason, best.candidate.id if best is not None else None)
    if context.out_dir:
        write_outputs(context.out_dir, state, report)
    update: dict[str, Any] = {
        "status": status,
        "status_reason": reason,
        "report": report,
        "log": [f"finalize: {status}: {reason}"],
    }
    if checked is not None:
        update["best"] = checked.dump()
    return update
