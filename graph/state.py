"""The graph's shared state, and the one way a node reads a typed artifact from it.

A TypedDict (LangGraph does not validate node outputs against a pydantic state anyway); each
artifact field holds the plain-dict form of a model from `graph.artifacts` (so checkpoints, Studio
and LangSmith show plain data), validated by the node that produced it and again, once, by `read`
in the node that consumes it. `InputState` is what a caller passes to `graph.invoke`; `OutputState`
is what a finished run is read for.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from typing_extensions import TypedDict

from graph.artifacts import Artifact, Best, BuildResult, Candidate, Feedback, Plan, Profile, Task, TestResult

RunStatus = Literal["running", "verified", "unverified", "failed"]


def add_seconds(total: dict[str, float] | None, more: dict[str, float] | None) -> dict[str, float]:
    """The node_seconds reducer: per-name sums."""
    merged = dict(total or {})
    for name, seconds in (more or {}).items():
        merged[name] = round(merged.get(name, 0.0) + seconds, 3)
    return merged


class InputState(TypedDict, total=False):
    """What starts a run: a problem file's path (or its source, with a name)."""

    problem_path: str
    """Path of a KernelBench-format problem file."""
    problem_source: str
    """The problem's text, when there is no file (Studio, notebooks); needs `problem_name`."""
    problem_name: str
    """Name to give a problem passed as text."""


class OutputState(TypedDict, total=False):
    """What a finished run reports."""

    status: RunStatus
    """verified: a candidate passed on the GPU; unverified: built but could not be run; failed."""
    status_reason: str
    """One line saying why the status is what it is."""
    best: dict[str, Any] | None
    """The best verified program (Best: its Candidate, TestResult and BuildResult), or None."""
    report: dict[str, Any]
    """The final report (also written to report.json when the context names an out_dir)."""


class State(InputState, OutputState, total=False):
    """Everything the nodes share."""

    task: dict[str, Any]
    """The loaded problem (Task)."""
    plan: dict[str, Any]
    """The planner's plan (Plan)."""
    reference_profile: dict[str, Any] | None
    """The reference's profile (Profile), when the planner could profile it."""
    candidate: dict[str, Any] | None
    """The program under evaluation (Candidate)."""
    build: dict[str, Any] | None
    """BuildResult of the current candidate."""
    test: dict[str, Any] | None
    """TestResult of the current candidate."""
    profile: dict[str, Any] | None
    """Profile of the current candidate."""
    feedback: dict[str, Any] | None
    """Feedback for the coder's next turn (fix or optimise)."""
    coder_mode: Literal["write", "fix", "optimize"]
    """What the coder does on its next turn."""
    coder_outcome: Literal["candidate", "policy_error", "policy_unavailable", "unchanged"]
    """What the coder's last turn produced: new code, an unusable answer, no answer, nothing new."""
    iteration: int
    """Coder turns so far."""
    fix_streak: int
    """Consecutive fix turns since the last passing candidate."""
    optimize_rounds: int
    """Optimisation turns taken so far."""
    last_gain: float | None
    """Relative speed gain of the latest verified candidate over the previous best."""
    spent_s: Annotated[float, operator.add]
    """Seconds spent in nodes so far, summed (the wall-time budget survives a resume)."""
    node_seconds: Annotated[dict[str, float], add_seconds]
    """Wall seconds per node name, summed over its turns (the report's time split, the eval's breakdown)."""
    history: Annotated[list[dict[str, Any]], operator.add]
    """One Attempt per coder -> verifier round, appended."""
    log: Annotated[list[str], operator.add]
    """Human-readable progress lines, appended by every node."""
    model_calls: Annotated[list[dict[str, Any]], operator.add]
    """One record per model request of the LLM policy (nodes/llm/call_log.py: ModelCall), appended."""


ARTIFACTS: dict[str, type[Artifact]] = {
    "task": Task,
    "plan": Plan,
    "reference_profile": Profile,
    "candidate": Candidate,
    "build": BuildResult,
    "test": TestResult,
    "profile": Profile,
    "feedback": Feedback,
    "best": Best,
}
"""The state keys that hold an artifact, and the model each holds."""

A = TypeVar("A", bound=Artifact)


class MissingArtifactError(KeyError):
    """A node asked for an artifact no earlier node has put in the state."""


def read(state: Mapping[str, Any], key: str, model: type[A]) -> A:
    """The artifact under `key` as a validated `model`; a clear error when it is missing or misnamed."""
    found = read_optional(state, key, model)
    if found is None:
        raise MissingArtifactError(f"the state holds no {key!r} ({model.__name__}) yet")
    return found


def read_optional(state: Mapping[str, Any], key: str, model: type[A]) -> A | None:
    """Like `read`, but None where the state has no such artifact (yet), e.g. `best` before a pass."""
    expected = ARTIFACTS.get(key)
    if expected is not model:
        held = expected.__name__ if expected else "no artifact"
        raise TypeError(f"state[{key!r}] holds {held}, not {model.__name__}")
    value = state.get(key)
    if value is None:
        return None
    return value if isinstance(value, model) else model.model_validate(value)
