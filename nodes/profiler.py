"""Profile node: profile the passing candidate and turn the evidence into optimisation advice."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from graph.artifacts import Candidate, Feedback, Plan, Task, TestResult
from graph.context import Context
from graph.policy import PolicyUnavailableError, get_policy
from graph.state import State
from nodes.timing import charged
from nodes.worker_client import eval_request, run_worker, to_profile


@charged
def profiler(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Profile the candidate in the worker; the policy's verifier role turns it into Feedback."""
    context = runtime.context
    task = Task.model_validate(state["task"])
    plan = Plan.model_validate(state["plan"])
    candidate = Candidate.model_validate(state["candidate"])
    test = TestResult.model_validate(state["test"])
    response = run_worker(eval_request(task, candidate.source, context, "profile"), context)
    if response.get("status") != "passed" or "profile" not in response:
        reason = response.get("message") or response.get("status", "unknown")
        feedback = Feedback(kind="optimize", summary=f"no profile available ({reason})")
        return {
            "profile": None,
            "feedback": feedback.dump(),
            "coder_mode": "optimize",
            "log": [f"profiler: no profile for candidate {candidate.id}: {reason}"],
        }
    profile = to_profile(response["profile"])
    try:
        feedback = get_policy(context).advise(task, plan, candidate, test, profile)
    except PolicyUnavailableError as exc:
        feedback = Feedback(kind="optimize", summary=f"no advice: the verifier is unavailable ({exc})")
    return {
        "profile": profile.dump(),
        "feedback": feedback.dump(),
        "coder_mode": "optimize",
        "log": [f"profiler: {profile.summary}", f"verifier advice: {feedback.summary}"],
    }
