"""Coder node: skill 1 writes a program from the plan; skill 2 fixes or optimises from feedback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from graph.artifacts import Best, Candidate, Feedback, Plan, Task
from graph.context import Context
from graph.policy import PolicyOutputError, PolicyUnavailableError, accepts_keyword, get_policy
from graph.state import State, read, read_optional
from nodes.support.budget import charged
from nodes.support.turn_log import TurnLog


def _previous(state: State, mode: str, best: Best | None) -> Candidate:
    """Fix the program that just failed; optimise the best verified one."""
    if mode == "optimize" and best is not None:
        return best.candidate
    return read(state, "candidate", Candidate)


@charged
def coder(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Ask the policy for the next program; an unusable answer becomes parse-error feedback."""
    context = runtime.context
    policy = get_policy(context)
    task = read(state, "task", Task)
    plan = read(state, "plan", Plan)
    best = read_optional(state, "best", Best)
    mode = state.get("coder_mode", "write")
    iteration = state.get("iteration", 0) + 1
    update: dict[str, Any] = {"iteration": iteration}
    if mode == "optimize":
        update["optimize_rounds"] = state.get("optimize_rounds", 0) + 1
    turns = TurnLog(context)
    turns.outcome(state)  # the verifier's result for the candidate this turn follows
    if iteration == 1:
        turns.run_started(task, plan)
    given: Feedback | None = None
    previous: Candidate | None = None

    try:
        if mode == "write" or not state.get("candidate"):
            retry = state.get("feedback") if state.get("coder_outcome") == "policy_error" else None
            if retry and accepts_keyword(policy.write, "feedback"):  # why the last answer was unusable
                given = read(state, "feedback", Feedback)
                write_again: Callable[..., Candidate] = policy.write  # the optional keyword is checked above
                candidate = write_again(task, plan, iteration, feedback=given)
            else:
                candidate = policy.write(task, plan, iteration)
        else:
            given = read(state, "feedback", Feedback)
            previous = _previous(state, mode, best)
            candidate = policy.revise(task, plan, previous, given, mode, iteration)
    except PolicyUnavailableError as exc:
        return update | {
            "coder_outcome": "policy_unavailable",
            "status": "failed",
            "status_reason": f"the coder is unavailable: {exc}",
            "log": [f"coder: turn {iteration} ({mode}) could not ask the policy: {exc}"],
        }
    except PolicyOutputError as exc:
        raw = str(getattr(exc, "raw", "") or "")
        turns.record(policy, task, plan, iteration, mode, previous, given, None, error=str(exc), raw=raw)
        evidence = getattr(exc, "feedback", None)
        feedback = (
            evidence()
            if callable(evidence)
            else Feedback(
                kind="parse_error",
                summary=f"the {mode} answer could not be used: {exc}",
                suggestions=["answer with one complete Python program defining ModelNew"],
            )
        )
        update |= {
            "coder_outcome": "policy_error",
            "coder_mode": mode if state.get("candidate") else "write",
            "fix_streak": state.get("fix_streak", 0) + 1,
            "feedback": feedback.dump(),
            "log": [f"coder: turn {iteration} ({mode}) produced no usable program: {exc}"],
        }
        return update

    turns.record(policy, task, plan, iteration, mode, previous, given, candidate)
    if mode == "optimize" and best is not None and candidate.source == best.candidate.source:
        return update | {
            "coder_outcome": "unchanged",
            "log": [f"coder: turn {iteration} (optimize): {candidate.summary or 'nothing new to try'}"],
        }
    return update | {
        "candidate": candidate.dump(),
        "coder_outcome": "candidate",
        "build": None,
        "test": None,
        "profile": None,
        "log": [f"coder: turn {iteration} ({mode}) wrote candidate {candidate.id}: {candidate.summary}"],
    }
