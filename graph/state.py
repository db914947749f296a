"""The graph's shared state.

A TypedDict (LangGraph does not validate node outputs against a pydantic state anyway); each
artifact field holds the plain-dict form of a model from `graph.artifacts`, validated by the node
that produced it. `InputState` is what a caller passes to `graph.invoke`; `OutputState` is what a
finished run is read for.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal

from typing_extensions import TypedDict

RunStatus = Literal["running", "verified", "unverified", "failed"]


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
    """The best verified candidate (Candidate) with its TestResult, or None."""
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
    history: Annotated[list[dict[str, Any]], operator.add]
    """One Attempt per coder -> verifier round, appended."""
    log: Annotated[list[str], operator.add]
    """Human-readable progress lines, appended by every node."""
    model_calls: Annotated[list[dict[str, Any]], operator.add]
    """One record per model request of the LLM policy (nodes/llm/call_log.py: ModelCall), appended."""
