"""The profile node: what the policy's advise is given, and the real node on the CPU (worker subprocess,
diagnosis, retrieval, a plain policy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES
from support.profiles import host_sync, plan

from graph.artifacts import Feedback, Finding, TensorSpec, TestResult
from graph.context import Context
from graph.policy import register_policy, unregister_policy
from nodes.profiler import policy_advice


class _Reader:
    name = "diag-reader"

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def advise(
        self,
        task: Any,
        plan: Any,
        candidate: Any,
        test: Any,
        profile: Any,
        *,
        diagnosis: str = "",
        notes: Any = (),
    ) -> Feedback:
        self.seen = {"diagnosis": diagnosis, "notes": list(notes)}
        return Feedback(kind="optimize", summary="read it")


class _Plain:
    name = "plain"

    def advise(self, task: Any, plan: Any, candidate: Any, test: Any, profile: Any) -> Feedback:
        return Feedback(kind="optimize", summary="plain advice")


class _FindingsMapper:
    name = "findings-mapper"

    def __init__(self) -> None:
        self.seen: list[Finding] = []

    def advise(
        self, task: Any, plan: Any, candidate: Any, test: Any, profile: Any, *, findings: Any = ()
    ) -> Feedback:
        self.seen = list(findings)
        return Feedback(kind="optimize", summary="mapped")


@pytest.mark.parametrize(
    "policy", [_Reader(), _Plain(), _FindingsMapper()], ids=["reads-diagnosis", "plain", "maps-findings"]
)
def test_the_policy_gets_the_diagnosis_and_notes_only_when_it_takes_them(policy: Any) -> None:
    register_policy(policy.name, lambda context: policy)
    try:
        diagnosed = host_sync()
        advice, read, why = policy_advice(
            Context(policy=policy.name), None, None, None, None, None, diagnosed, ["[n] note"]
        )  # type: ignore[arg-type]
    finally:
        unregister_policy(policy.name)
    assert why == "" and advice is not None
    assert read is isinstance(policy, _Reader)
    if isinstance(policy, _Reader):
        assert policy.seen == {"diagnosis": diagnosed.text(), "notes": ["[n] note"]}
    if isinstance(policy, _FindingsMapper):  # the diagnosis as data; its advice does not lead the merge
        assert policy.seen == diagnosed.findings and policy.seen[0].rule == "host-sync"


def test_profile_node_on_the_cpu_gives_cited_feedback_and_writes_the_report(tmp_path: Path) -> None:
    """The real node: worker subprocess (CPU, no extension), diagnosis, retrieval, a plain policy."""
    import json

    from langgraph.runtime import Runtime

    from graph.artifacts import Candidate, Task
    from nodes.profiler import profiler

    problem = FIXTURES.parent / "candidates" / "worker" / "affine_problem.py"
    source = (FIXTURES.parent / "candidates" / "worker" / "torch_ok.py").read_text()
    spec = TensorSpec(shape=[64, 256], dtype="float32")
    task = Task(
        name="affine",
        path=str(problem),
        source=problem.read_text(),
        init_inputs=[2.0, 0.5],
        inputs=[spec],
        output=spec,
    )
    candidate = Candidate(id=3, source=source, mode="write", policy="plain")
    state: dict[str, Any] = {
        "task": task.dump(),
        "plan": plan("mul", 2 * 64 * 256, 2 * 4 * 64 * 256).dump(),
        "candidate": candidate.dump(),
        "test": TestResult(status="passed", candidate_ms=0.05).dump(),
    }
    register_policy("plain", lambda context: _Plain())
    try:
        context = Context(policy="plain", device="cpu", eval_timeout_s=300.0, out_dir=str(tmp_path))
        update = profiler(state, Runtime(context=context))  # type: ignore[arg-type]
    finally:
        unregister_policy("plain")
    feedback = Feedback.model_validate(update["feedback"])
    assert feedback.summary.startswith(
        "profiled without a GPU"
    )  # the diagnosis leads a plain policy's advice
    assert "plain advice" not in feedback.summary and feedback.sources
    assert update["coder_mode"] == "optimize" and update["profile"]["source"] == "torch_profiler"
    assert any(line.startswith("diagnosis: ") for line in update["log"])
    report = json.loads((tmp_path / "profiles" / "candidate-3.json").read_text())
    assert report["diagnosis"]["findings"][0]["rule"] == "no-gpu-profile" and report["ncu"] is None
