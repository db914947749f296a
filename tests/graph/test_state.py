"""graph.state.read: the one way a node gets a typed artifact out of the plain-data state."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from graph.artifacts import Best, BuildResult, Candidate, Plan, Task, TestResult
from graph.state import ARTIFACTS, MissingArtifactError, State, read, read_optional


def _best() -> Best:
    return Best(
        candidate=Candidate(id=2, source="class ModelNew: ...", mode="fix", policy="offline"),
        test=TestResult(status="passed", trials=5, trials_passed=5, candidate_ms=0.5),
        build=BuildResult(ok=True, seconds=1.5),
    )


def test_an_artifact_comes_back_typed_from_its_plain_form() -> None:
    state: State = {"plan": Plan(task="t", total_bytes=64).dump(), "best": _best().dump()}
    plan = read(state, "plan", Plan)
    assert isinstance(plan, Plan) and plan.total_bytes == 64
    best = read(state, "best", Best)
    assert best.candidate.id == 2 and best.test.trials == 5 and best.build.seconds == 1.5
    assert best == _best() and state["best"] == _best().dump()  # the state keeps plain data


def test_the_best_program_keeps_the_shape_reports_and_checkpoints_read() -> None:
    dumped = _best().dump()
    assert set(dumped) == {"candidate", "test", "build"}
    assert dumped["candidate"]["source"] == "class ModelNew: ..." and dumped["test"]["candidate_ms"] == 0.5


def test_a_missing_artifact_is_none_or_a_clear_error() -> None:
    state: State = {"best": None}
    assert read_optional(state, "best", Best) is None
    assert read_optional(state, "task", Task) is None
    with pytest.raises(MissingArtifactError, match="no 'task' \\(Task\\)"):
        read(state, "task", Task)


def test_asking_for_the_wrong_model_fails_before_validating() -> None:
    state: State = {"plan": Plan(task="t").dump()}
    with pytest.raises(TypeError, match="holds Plan, not Task"):
        read(state, "plan", Task)
    with pytest.raises(TypeError, match="holds no artifact"):
        read(state, "iteration", Task)


def test_a_malformed_artifact_fails_validation_once_at_the_reader() -> None:
    state: State = {"test": {"status": "passed", "trials": "many"}}
    with pytest.raises(ValidationError):
        read(state, "test", TestResult)


def test_every_artifact_key_is_a_state_field() -> None:
    assert set(ARTIFACTS) <= State.__optional_keys__
