"""Planner node: load the problem, profile the reference (on a GPU), analyse it and write the structured plan."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from graph.artifacts import Task, TensorSpec
from graph.context import Context
from graph.policy import PolicyOutputError, PolicyUnavailableError, get_policy
from graph.state import State
from nodes.support.budget import charged
from nodes.support.evidence import planner_reference_profile


def _spec(value: Any) -> TensorSpec | None:
    if value is None:
        return None
    return TensorSpec(shape=list(value.shape), dtype=str(value.dtype).removeprefix("torch."))


def load_task(state: State) -> Task:
    """The Task named by the run's input: a problem file, or a problem's source with a name."""
    from tools.problem import ProblemError, load_problem  # torch-heavy: imported on first use

    path = state.get("problem_path")
    if not path:
        source = state.get("problem_source")
        if not source:
            raise ProblemError("no problem given: pass problem_path, or problem_source with problem_name")
        name = state.get("problem_name") or "problem"
        inline_dir = Path(tempfile.mkdtemp(prefix="stitchcuda-problem-"))
        path = str(inline_dir / f"{name}.py")
        Path(path).write_text(source)
    info = load_problem(path)
    return Task(
        name=info.name,
        path=str(info.path),
        source=info.source,
        level=info.level,
        init_inputs=list(info.init_inputs),
        inputs=[_spec(s) for s in info.inputs],
        output=_spec(info.output),
    )


@charged
def planner(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Load the task (a bad problem ends the run with one clear line) and ask the policy for a plan."""
    from tools.problem import ProblemError

    try:
        task = load_task(state)
    except ProblemError as exc:
        return {"status": "failed", "status_reason": str(exc), "log": [f"planner: {exc}"]}
    reference, profile_note = planner_reference_profile(task, runtime.context)
    try:
        plan = get_policy(runtime.context).plan(task, reference)
    except (PolicyUnavailableError, PolicyOutputError) as exc:
        reason = f"the planner could not plan: {exc}"
        return {
            "task": task.dump(),
            "status": "failed",
            "status_reason": reason,
            "log": [f"planner: {reason}"],
        }
    covered = ", ".join(plan.covered_ops) or "none"
    uncovered = ", ".join(plan.uncovered_ops) or "none"
    return {
        "task": task.dump(),
        "plan": plan.dump(),
        "status": "running",
        "coder_mode": "write",
        "iteration": 0,
        "fix_streak": 0,
        "optimize_rounds": 0,
        "last_gain": None,
        "best": None,
        "reference_profile": reference.dump() if reference else None,
        "log": [
            *([profile_note] if profile_note else []),
            f"planner: {task.name}: {len(plan.ops)} ops in {len(plan.groups)} fusion groups; "
            f"custom kernels for [{covered}], PyTorch for [{uncovered}]",
        ],
    }
