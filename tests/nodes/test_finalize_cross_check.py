"""The KernelBench-harness cross-check runs once per run, in finalize, on the program the run returns."""

from __future__ import annotations

from typing import Any

import pytest

import nodes.finalize as finalize_node
from graph.artifacts import Best, BuildResult, Candidate, TestResult
from graph.context import Context

TASK = {"name": "p", "path": "/nonexistent/p.py", "source": "class Model: pass\n"}


def _best(kernelbench: dict[str, Any] | None = None) -> Best:
    return Best(
        candidate=Candidate(id=2, source="class ModelNew: pass\n", mode="optimize", policy="offline"),
        test=TestResult(status="passed", trials=5, kernelbench=kernelbench),
        build=BuildResult(ok=True),
    )


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The worker run stands in for a GPU: it records which candidate it was asked about."""
    seen: list[int] = []

    def check(task: Any, candidate: Candidate, context: Context) -> dict[str, Any]:
        seen.append(candidate.id)
        return {"status": "wrong_output", "message": "max diff 0.01", "max_abs_err": 0.01, "tolerance": 1e-4}

    monkeypatch.setattr(finalize_node, "kernelbench_cross_check", check)
    return seen


def test_the_returned_program_is_checked_once_and_the_verdict_reaches_the_report(calls: list[int]) -> None:
    state: Any = {"task": TASK, "best": _best().dump(), "history": [], "plan": {}}
    checked = finalize_node.cross_checked(state, Context(tolerance_mode="strict", kernelbench_check=True))
    assert calls == [2]
    assert checked is not None and checked.test.kernelbench is not None
    assert checked.test.kernelbench["status"] == "wrong_output"
    again = finalize_node.cross_checked({**state, "best": checked.dump()}, Context(tolerance_mode="strict"))
    assert again is None and calls == [2]  # a program already judged is not run again


@pytest.mark.parametrize(
    "context",
    [Context(tolerance_mode="kernelbench"), Context(tolerance_mode="strict", kernelbench_check=False)],
    ids=["kernelbench-mode", "check-off"],
)
def test_no_cross_check_where_it_adds_nothing(calls: list[int], context: Context) -> None:
    state: Any = {"task": TASK, "best": _best().dump()}
    assert finalize_node.cross_checked(state, context) is None
    assert finalize_node.cross_checked({"task": TASK}, Context(tolerance_mode="strict")) is None
    assert calls == []
