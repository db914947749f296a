"""Coder node: skill 1 writes a program from the plan; skill 2 fixes or optimises from feedback."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from graph.artifacts import Candidate, Feedback, Plan, Task
from graph.context import Context
from graph.policy import PolicyOutputError, PolicyUnavailableError, accepts_keyword, get_policy
from graph.state import State
from nodes.support.budget import charged
from nodes.support.turn_log import TurnLog


def _previous(state: State, mode: str) -> Candidate:
    """Fix the program that just failed; optimise the best verified one."""
    if mode == "optimize" and state.get("best"):
        return Candidate.model_validate(state["best"]["candidate"])
    return Candidate.model_validate(state["candidate"])


@charged
def coder(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Ask the policy for the next program; an unusable answer becomes parse-error feedback."""
    context = runtime.context
    policy = get_policy(context)
    task = Task.model_validate(state["task"])
    plan = Plan.model_validate(state["plan"])
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
                given = Feedback.model_validate(retry)
                candidate = policy.write(task, plan, iteration, feedback=given)
            else:
                candidate = policy.write(task, plan, iteration)
        else:
            given = Feedback.model_validate(state["feedback"])
            previous = _previous(state, mode)
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
    best = state.get("best")
    if mode == "optimize" and best and candidate.source == best["candidate"]["source"]:
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
