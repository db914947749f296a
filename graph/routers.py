"""Conditional edges: plain functions of (state, runtime) returning a Literal.

Every loop in the graph is bounded here: coder turns (`max_iterations`), consecutive fixes
(`max_fix_attempts`), optimisation rounds (`max_optimize_rounds`, continued only while the last
step gained at least `min_gain`) and wall time (`wall_time_s`, summed over node runs so a resumed
run keeps its budget).
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from graph.context import Context
from graph.state import State

FAILURE_STATUSES = frozenset({"build_error", "runtime_error", "timeout", "wrong_output", "crashed"})


def budget_exhausted(state: State, context: Context) -> str | None:
    """Why no further coder turn is allowed, or None while budget remains."""
    if state.get("iteration", 0) >= context.max_iterations:
        return f"iteration budget spent ({context.max_iterations} coder turns)"
    if state.get("spent_s", 0.0) >= context.wall_time_s:
        return f"wall-time budget spent ({context.wall_time_s:.0f} s)"
    return None


def may_fix(state: State, context: Context) -> bool:
    return budget_exhausted(state, context) is None and state.get("fix_streak", 0) < context.max_fix_attempts


def may_optimize(state: State, context: Context) -> bool:
    if budget_exhausted(state, context) is not None:
        return False
    if state.get("optimize_rounds", 0) >= context.max_optimize_rounds:
        return False
    gain = state.get("last_gain")
    # The first verified program may always be optimised; after that only while steps pay off.
    return gain is None or gain >= context.min_gain


def route_after_planner(state: State) -> Literal["coder", "finalize"]:
    """A problem that failed to load or plan goes straight to the report."""
    return "finalize" if state.get("status") == "failed" or not state.get("plan") else "coder"


def route_after_coder(state: State, runtime: Runtime[Context]) -> Literal["verifier", "fix", "finalize"]:
    """New code goes to the verifier; an unusable answer is retried as a fix while budget lasts."""
    outcome = state.get("coder_outcome", "candidate")
    if outcome == "candidate":
        return "verifier"
    if outcome == "policy_error" and may_fix(state, runtime.context):
        return "fix"
    return "finalize"  # "unchanged": the optimiser had nothing more to try, or budget spent


def route_after_verifier(state: State, runtime: Runtime[Context]) -> Literal["fix", "profile", "finalize"]:
    """Failures and programs the hack checks reject go to the fix branch, clean passes to the profiler."""
    test = state.get("test") or {}
    status, hacked = test.get("status"), test.get("verdict") == "hacked"
    if status == "passed" and not hacked:
        return "profile"
    if (status in FAILURE_STATUSES or hacked) and may_fix(state, runtime.context):
        return "fix"
    return "finalize"


def route_after_profile(state: State, runtime: Runtime[Context]) -> Literal["optimize", "finalize"]:
    """Optimise again while budget lasts and the last step gained; otherwise report."""
    return "optimize" if may_optimize(state, runtime.context) else "finalize"
