"""Every model request leaves a record: role, model, latency, answer size and what became of it.

The answers come from the stub OpenAI server over real HTTP; the cases are the ones a real local
server produced (`transformers serve` ignores `response_format` and `tool_choice`, a small model
answers in prose, cuts programs at the token limit or writes no fence).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.llm_answers import RELU_PLAN
from support.llm_stub_server import Reply, StubServer
from test_llm_policy import (
    PASSED,
    PLAN,
    PROFILE,
    RELU_SOLUTION,
    TASK,
    coder_answer,
    make_policy,
)

from graph.artifacts import Candidate, Feedback, Plan
from nodes.llm.call_log import CALLS_FILE, collect_model_calls, collecting, summarize
from nodes.llm.errors import CoderOutputError, LLMCallError, LLMSettingsError
from nodes.llm.settings import resolve_role_settings
from nodes.llm.structured import json_schema_of, skeleton
from nodes.support.report import render_markdown

FEEDBACK = Feedback(kind="build_error", summary="error: expected a semicolon")


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as stub:
        yield stub


PROSE = "Sure! Here is how I would plan it: first write a kernel, then test it."


def test_a_server_that_ignores_json_schema_and_tool_choice_is_asked_for_text_from_then_on(
    server: StubServer,
) -> None:
    """What `transformers serve` does: 200 with free text whatever response_format and tool_choice say."""
    server.add(Reply.text(PROSE), Reply.text(PROSE), Reply.text("The plan: " + json.dumps(RELU_PLAN)))
    policy = make_policy(server)
    with collecting() as calls:
        plan = policy.plan(TASK, None)
    assert "via text" in plan.notes and "ignored by the server" in plan.notes
    assert [(c["method"], c["outcome"]) for c in calls] == [
        ("json_schema", "rejected"),
        ("function_calling", "rejected"),
        ("text", "repaired"),
    ]
    assert calls[0]["detail"].startswith("the server ignored json_schema: the answer is not a JSON object")
    assert calls[1]["detail"].startswith("the server ignored function_calling: the answer has no tool call")
    assert calls[2]["detail"] == "took the JSON object out of the prose"
    assert all(c["role"] == "planner" and c["model"] == "stub-model" for c in calls)
    assert calls[0]["answer_chars"] == len(PROSE) and calls[0]["input_tokens"] == 11
    assert all(c["latency_s"] >= 0 for c in calls)

    server.add(Reply.json(RELU_PLAN))
    with collecting() as calls:
        policy.plan(TASK, None)  # both ignored methods are remembered: one request, as text
    assert [(c["method"], c["outcome"]) for c in calls] == [("text", "parsed")]
    assert "response_format" not in server.requests[-1].body and "tools" not in server.requests[-1].body


def test_json_that_a_constraining_server_cut_short_does_not_count_as_ignored(server: StubServer) -> None:
    truncated = json.dumps(RELU_PLAN)[:60]
    server.add(Reply.text(truncated, finish_reason="length"), Reply.json(RELU_PLAN))
    policy = make_policy(server)
    with collecting() as calls:
        policy.plan(TASK, None)
    assert [(c["method"], c["outcome"]) for c in calls] == [
        ("json_schema", "rejected"),
        ("function_calling", "repaired"),  # JSON in text where a tool call was asked for
    ]
    assert calls[0]["detail"] == "the answer hit the token limit before the JSON was complete"
    assert calls[0]["finish_reason"] == "length"
    server.add(Reply.json(RELU_PLAN))
    with collecting() as calls:
        policy.plan(TASK, None)
    assert [c["method"] for c in calls] == ["json_schema"]  # still tried: the server did constrain it


def test_structured_output_setting_goes_straight_to_text_with_schema_and_skeleton(server: StubServer) -> None:
    server.add(Reply.json(RELU_PLAN))
    plan = make_policy(server, llm_structured_output="text").plan(TASK, None)
    assert "via text" in plan.notes
    (request,) = server.requests
    assert "response_format" not in request.body and "tools" not in request.body
    prompt = request.text()
    assert "validates against this JSON schema (Plan)" in prompt
    shape = json.loads(prompt.split("Its shape, with placeholders to replace:\n")[1])
    assert shape["groups"][0].keys() >= {"id", "kind", "nodes", "template", "covered"}
    assert shape["host"]["cuda_graph"] is False and shape["subtasks"][0]["groups"] == ["..."]


def test_skeleton_of_a_schema_validates_as_the_model() -> None:
    assert Plan.model_validate(skeleton(json_schema_of(Plan))).groups[0].id == "..."


def test_structured_output_setting_is_checked() -> None:
    from graph.context import Context

    assert resolve_role_settings(
        Context(llm_model="m"), "planner", {"STITCHCUDA_PLANNER_STRUCTURED_OUTPUT": "text, json_schema"}
    ).structured_output == ("text", "json_schema")
    with pytest.raises(LLMSettingsError, match="STITCHCUDA_LLM_STRUCTURED_OUTPUT='xml' is not a comma list"):
        resolve_role_settings(Context(llm_model="m"), "coder", {"STITCHCUDA_LLM_STRUCTURED_OUTPUT": "xml"})
    with pytest.raises(LLMSettingsError, match="distinct methods"):
        resolve_role_settings(Context(llm_model="m", llm_structured_output="text,text"), "coder", {})


def test_coder_calls_are_parsed_repaired_rejected_or_failed(server: StubServer, tmp_path: Path) -> None:
    server.add(
        Reply.text(coder_answer()),
        Reply.text("Here is the program.\n\n" + RELU_SOLUTION),
        Reply.text("Summary: half\n```python\nimport torch\nclass ModelNew(", finish_reason="length"),
        Reply.error(500, "model server out of memory"),
    )
    policy = make_policy(server, hybrid_start=False, out_dir=str(tmp_path))
    with collecting() as calls:
        policy.write(TASK, PLAN, 1)
        policy.write(TASK, PLAN, 2)
        with pytest.raises(CoderOutputError):
            policy.write(TASK, PLAN, 3)
        with pytest.raises(LLMCallError):
            policy.revise(
                TASK, PLAN, Candidate(id=3, source="x", mode="write", policy="llm"), FEEDBACK, "fix", 4
            )

    assert [(c["mode"], c["candidate"], c["outcome"]) for c in calls] == [
        ("write", 1, "parsed"),
        ("write", 2, "repaired"),
        ("write", 3, "rejected"),
        ("fix", 4, "failed"),
    ]
    assert calls[0]["detail"] == "" and calls[0]["finish_reason"] == "stop"
    assert calls[1]["detail"] == "read a program written without a code fence"
    assert "unterminated ```python block" in calls[2]["detail"] and calls[2]["finish_reason"] == "length"
    assert "server error 500" in calls[3]["detail"] and calls[3]["answer_chars"] == 0
    assert all(c["method"] is None and c["role"] == "coder" for c in calls)
    written = [json.loads(line) for line in (tmp_path / CALLS_FILE).read_text().splitlines()]
    assert written == calls  # the same records, appended as they happened


def test_advice_calls_are_recorded_with_the_candidate(server: StubServer) -> None:
    server.add(Reply.text("no advice"), Reply.text("still none"), Reply.text("nothing"))
    candidate = Candidate(id=7, source=RELU_SOLUTION, mode="write", policy="llm")
    with collecting() as calls:
        feedback = make_policy(server).advise(TASK, PLAN, candidate, PASSED, PROFILE)
    assert "verifier model's answer was unusable" in feedback.evidence
    assert [(c["role"], c["candidate"], c["outcome"]) for c in calls] == [("verifier", 7, "rejected")] * 3
    assert calls[2]["detail"] == "no JSON object in the answer"


def test_a_wrapped_node_hands_its_calls_to_the_state_update(server: StubServer) -> None:
    server.add(Reply.text(coder_answer()))
    policy = make_policy(server, hybrid_start=False)

    @collect_model_calls
    def node(state: dict[str, Any]) -> dict[str, Any]:
        policy.write(TASK, PLAN, 1)
        return {"log": ["wrote"], "model_calls": [{"role": "earlier"}]}

    update = node({})
    assert update["log"] == ["wrote"]
    assert [c["role"] for c in update["model_calls"]] == ["earlier", "coder"]

    @collect_model_calls
    def quiet(state: dict[str, Any]) -> dict[str, Any]:
        return {"log": []}

    assert "model_calls" not in quiet({})


def test_the_report_shows_one_row_per_call_and_the_totals() -> None:
    calls = [
        {"role": "planner", "model": "/models/SmolLM2", "method": "text", "outcome": "repaired",
         "detail": "took the JSON object out of the prose", "latency_s": 40.5, "answer_chars": 900,
         "input_tokens": 1800, "output_tokens": 300, "finish_reason": "stop"},
        {"role": "coder", "model": "/models/SmolLM2", "mode": "write", "candidate": 1, "outcome": "rejected",
         "detail": "the answer has no code | defining", "latency_s": 30.0, "answer_chars": 2000,
         "input_tokens": 2300, "output_tokens": 768, "finish_reason": "length"},
    ]  # fmt: skip
    assert summarize(calls) == {
        "calls": 2,
        "outcomes": {"parsed": 0, "repaired": 1, "rejected": 1, "failed": 0},
        "by_role": {"coder": 1, "planner": 1},
        "models": ["/models/SmolLM2"],
        "latency_s": 70.5,
    }
    report: dict[str, Any] = {
        "problem": "p", "status": "failed", "status_reason": "r", "policy": "llm", "device": "",
        "eager_ms": None, "candidate_ms": None, "speedup_vs_eager": None, "iterations": 1, "build_s": None,
        "covered_ops": [], "uncovered_ops": [], "plan": {"groups": []}, "attempts": [], "model_calls": calls,
    }  # fmt: skip
    text = render_markdown(report)
    section = text[text.index("## Model calls") :]
    assert "2 calls (1 repaired, 1 rejected); 70.5 s waiting for /models/SmolLM2." in section
    assert (
        "| 1 | planner | text | SmolLM2 | 40.5 | 900 | 1800/300 | stop | repaired | took the JSON" in section
    )
    assert (
        "| 2 | coder | write #1 | SmolLM2 | 30.0 | 2000 | 2300/768 | length | rejected | the answer has no code \\| defining |"
        in section
    )
