"""What the LLM policy borrows from the offline side: the operator table and a starting program.

The fx analysis and the offline policy live in `codegen/` (torch, written separately); the LLM policy
works without them, so every lookup here is lazy and degrades to "not available, because ..." instead
of failing. Each function returns its result with a one-line note saying where it came from, which
the policy records in the artifact so a run shows what the model was given.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from graph.artifacts import Candidate, OpInfo, Plan, Profile, Task
from graph.context import Context
from graph.policy import Policy

log = logging.getLogger(__name__)

OfflineFactory = Callable[[Context], Policy]

# Entry points of codegen.frontend.analysis tried in order: each takes a Task and returns OpInfo-like rows
# (or an object with `.ops`). Adjust here when that module settles its name.
ANALYSIS_ENTRY_POINTS: tuple[str, ...] = ("analyze_task", "analyze", "trace_task")


def default_offline_factory() -> OfflineFactory:
    """`codegen.policy.OfflinePolicy`, imported on first use."""
    module = importlib.import_module("codegen.policy")
    return module.OfflinePolicy


def make_offline_policy(context: Context, factory: OfflineFactory | None) -> tuple[Policy | None, str]:
    """The offline policy for this context, or None and why it is unavailable."""
    try:
        return (factory or default_offline_factory())(context), "offline policy"
    except Exception as exc:  # a missing or broken codegen must not stop the LLM policy
        return None, f"offline policy unavailable ({type(exc).__name__}: {exc})"


def _as_ops(result: Any) -> list[OpInfo]:
    rows = getattr(result, "ops", result)
    return [row if isinstance(row, OpInfo) else OpInfo.model_validate(row) for row in rows]


def _analysis_ops(task: Task) -> tuple[list[OpInfo] | None, str]:
    try:
        analysis = importlib.import_module("codegen.frontend.analysis")
    except Exception as exc:  # absent, or broken while another engineer writes it
        return None, f"codegen.frontend.analysis not importable ({type(exc).__name__}: {exc})"
    for name in ANALYSIS_ENTRY_POINTS:
        entry = getattr(analysis, name, None)
        if callable(entry):
            try:
                return _as_ops(entry(task)), f"codegen.frontend.analysis.{name}"
            except Exception as exc:
                return None, f"codegen.frontend.analysis.{name} failed ({type(exc).__name__}: {exc})"
    return None, f"codegen.frontend.analysis has none of {', '.join(ANALYSIS_ENTRY_POINTS)}"


def reference_ops(task: Task, profile: Profile | None, offline: Policy | None) -> tuple[list[OpInfo], str]:
    """The traced operator table: codegen.frontend.analysis first, else the offline planner's ops."""
    ops, note = _analysis_ops(task)
    if ops is not None:
        return ops, f"operator table from {note}"
    notes = [note]
    if offline is not None:
        try:
            return offline.plan(task, profile).ops, "operator table from the offline planner"
        except Exception as exc:
            notes.append(f"offline planner failed ({type(exc).__name__}: {exc})")
    else:
        notes.append("no offline policy")
    log.info("no operator table for %s: %s", task.name, "; ".join(notes))
    return [], "no operator table: " + "; ".join(notes)


def offline_plan(task: Task, offline: Policy | None) -> Plan | None:
    """The offline planner's plan (the planner's fallback when the model's answer is unusable)."""
    if offline is None:
        return None
    try:
        return offline.plan(task, None)
    except Exception as exc:
        log.info("offline plan for %s failed: %s", task.name, exc)
        return None


def offline_program(task: Task, offline: Policy | None, candidate_id: int) -> tuple[Candidate | None, str]:
    """The offline coder's program for the hybrid start, written from the offline policy's own plan."""
    if offline is None:
        return None, "offline policy unavailable"
    try:
        own_plan = offline.plan(task, None)
        return offline.write(task, own_plan, candidate_id), "offered"
    except Exception as exc:
        return None, f"offline program unavailable ({type(exc).__name__}: {exc})"
