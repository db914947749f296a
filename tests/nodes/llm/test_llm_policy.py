"""LLMPolicy driven through langchain-openai against a real HTTP server speaking the OpenAI API.

The server (tests/support/llm_stub_server.py) replays scripted answers and records each request, so these
tests check both directions: what the policy sent (prompts, response_format, tools) and what it made
of each answer, including the failures (400, 429, 500, slow, garbage). The only double is the
offline policy, injected at the policy seam for the op table and the hybrid start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph.artifacts import (
    Candidate,
    Feedback,
    KernelStat,
    OpInfo,
    Plan,
    Profile,
    Task,
    TensorSpec,
    TestResult,
)
from graph.context import Context
from graph.policy import PolicyOutputError, get_policy
from nodes.llm.errors import CoderOutputError, LLMCallError, LLMSettingsError, StructuredOutputError
from nodes.llm.policy import LLMPolicy

try:
    from support.llm_stub_server import Reply, StubServer
except ImportError:  # tests/ imported as a package
    from support.llm_stub_server import Reply, StubServer
from support.llm_answers import RELU_PLAN
from support.llm_answers import coder_answer as make_coder_answer

REPO = Path(__file__).resolve().parents[3]
RELU_SOLUTION = (REPO / "docs" / "examples" / "relu_solution.py").read_text()
OFFLINE_MARKER = "# written by the offline double"
KEY_ENV = {"OPENAI_API_KEY": "EMPTY"}

RELU_SOURCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(16, 16384)]


def get_init_inputs():
    return []
"""

TASK = Task(
    name="19_ReLU",
    path="/problems/level1/19_ReLU.py",
    source=RELU_SOURCE,
    level="level1",
    inputs=[TensorSpec(shape=[16, 16384], dtype="float32")],
    output=TensorSpec(shape=[16, 16384], dtype="float32"),
)
TRACED_OPS = [
    OpInfo(
        node="relu",
        op="relu",
        target="torch.relu",
        inputs=[TensorSpec(shape=[16, 16384], dtype="float32")],
        output=TensorSpec(shape=[16, 16384], dtype="float32"),
        flops=262_144,
        bytes=2_097_152,
    )
]
PLAN = Plan.model_validate({**RELU_PLAN, "task": "19_ReLU", "ops": [op.dump() for op in TRACED_OPS]})
PROFILE = Profile(
    source="torch_profiler",
    device_ms=0.0123,
    kernel_count=1,
    own_kernel_share=1.0,
    top=[KernelStat(name="relu_f4", calls=1, total_ms=0.0123, share=1.0)],
)
PASSED = TestResult(
    status="passed", trials=5, trials_passed=5, candidate_ms=0.0123, eager_ms=0.0150, speedup_vs_eager=1.22
)
ADVICE = {
    "kind": "build_error",  # a model's wrong label: advise() always returns kind "optimize"
    "summary": "relu_f4 reaches 340 GB/s, far below the copy ceiling",
    "evidence": "0.0123 ms for 2 MiB",
    "suggestions": ["launch enough blocks to cover all 132 SMs", "capture the forward in a CUDA graph"],
    "sources": ["note-vectorised-memory"],
}


class OfflineDouble:
    """Stands in for codegen.policy.OfflinePolicy at the seam: a fixed op table and program."""

    name = "offline-double"

    def __init__(self, context: Context) -> None:
        self.context = context

    def plan(self, task: Task, reference_profile: Profile | None) -> Plan:
        return Plan(task=task.name, ops=TRACED_OPS, covered_ops=["relu"], notes="offline plan")

    def write(self, task: Task, plan: Plan, candidate_id: int) -> Candidate:
        source = OFFLINE_MARKER + "\n" + RELU_SOLUTION
        return Candidate(id=candidate_id, source=source, mode="write", policy="offline")


def broken_offline(context: Context) -> OfflineDouble:
    raise ImportError("No module named 'codegen.policy'")


def coder_answer(program: str = RELU_SOLUTION, summary: str = "a vectorised ReLU") -> str:
    return make_coder_answer(program, summary)


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as stub:
        yield stub


def make_policy(
    server: StubServer,
    *,
    offline: Any = OfflineDouble,
    environ: dict[str, str] | None = None,
    **context: Any,
) -> LLMPolicy:
    settings: dict[str, Any] = {
        "policy": "llm",
        "llm_model": "stub-model",
        "llm_base_url": server.url,
        "llm_timeout_s": 5.0,
        "llm_max_retries": 0,
    }
    settings.update(context)
    return LLMPolicy(
        Context(**settings), offline_factory=offline, environ=KEY_ENV if environ is None else environ
    )


# ----------------------------------------------------------------------------------------------
# Planner
# ----------------------------------------------------------------------------------------------


def test_planner_asks_for_a_plan_by_json_schema_with_the_reference_and_op_table(server: StubServer) -> None:
    server.add(Reply.json(RELU_PLAN))
    plan = make_policy(server).plan(TASK, PROFILE)

    assert plan.task == "19_ReLU"  # the task's name, not the model's
    assert [g.id for g in plan.groups] == ["g_relu"]
    assert plan.traced and [op.node for op in plan.ops] == ["relu"]
    assert plan.ops[0].covered and plan.total_bytes == 2_097_152
    assert plan.groups[0].flops == 262_144  # per-group totals from the trace
    assert plan.covered_ops == ["relu"] and plan.uncovered_ops == []
    assert "via json_schema" in plan.notes

    (request,) = server.requests
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Plan"
    assert {"groups", "subtasks", "host"} <= set(response_format["json_schema"]["schema"]["properties"])
    assert "tools" not in request.body
    prompt = request.text()
    assert "return torch.relu(x)" in prompt  # the reference source
    assert "| relu | relu | torch.relu | float32[16, 16384] | 262k | 2.1M |" in prompt  # the op table
    assert "relu_f4: 1 call(s)" in prompt  # the reference profile
    assert request.body["model"] == "stub-model"


def test_planner_falls_back_to_function_calling_when_json_schema_is_rejected(server: StubServer) -> None:
    server.add(
        Reply.error(400, "response_format json_schema is not supported by this server"),
        Reply.tool_call("Plan", RELU_PLAN),
        Reply.tool_call("Plan", RELU_PLAN),
    )
    policy = make_policy(server)
    plan = policy.plan(TASK, None)
    assert [g.id for g in plan.groups] == ["g_relu"]
    assert "via function_calling (after json_schema: rejected by the server (400)" in plan.notes
    first, second = server.requests
    assert first.body["response_format"]["type"] == "json_schema"
    assert "response_format" not in second.body
    assert second.body["tools"][0]["function"]["name"] == "Plan"
    assert second.body["tool_choice"] == {"type": "function", "function": {"name": "Plan"}}

    policy.plan(TASK, None)  # the rejection is remembered: no second 400 round trip
    assert len(server.requests) == 3
    assert "tools" in server.requests[2].body and "response_format" not in server.requests[2].body


def test_planner_parses_json_wrapped_in_thinking_and_prose(server: StubServer) -> None:
    import json

    text = f"<think>groups first</think>Here is the plan:\n```json\n{json.dumps(RELU_PLAN)}\n```\nDone."
    server.add(Reply.text(text))
    plan = make_policy(server).plan(TASK, None)
    assert plan.subtasks[0].title == "Write the float4 ReLU kernel"
    assert len(server.requests) == 1


def test_planner_last_resort_is_plain_text_with_the_schema_in_the_prompt(server: StubServer) -> None:
    import json

    server.add(
        Reply.error(400, "response_format is not supported"),
        Reply.error(400, "tool_choice is not supported"),
        Reply.text("The plan: " + json.dumps(RELU_PLAN) + " (end)"),
    )
    plan = make_policy(server).plan(TASK, None)
    assert "via text" in plan.notes
    last = server.requests[2]
    assert "response_format" not in last.body and "tools" not in last.body
    assert "validates against this JSON schema (Plan)" in last.text()


def test_planner_garbage_falls_back_to_the_offline_plan_and_says_so(server: StubServer) -> None:
    server.add(*[Reply.text("I would rather write a poem.")] * 3)
    plan = make_policy(server).plan(TASK, None)
    assert plan.notes.startswith("offline plan")
    assert "planner model's answer was unusable" in plan.notes
    assert len(server.requests) == 3  # json_schema, function_calling, text


def test_planner_garbage_without_offline_policy_raises_structured_output_error(server: StubServer) -> None:
    server.add(Reply.text("no"), Reply.tool_call("Plan", {"task": 3}), Reply.text("{broken"))
    with pytest.raises(StructuredOutputError) as info:
        make_policy(server, offline=broken_offline).plan(TASK, None)
    message = str(info.value)
    assert "no valid Plan from the planner model" in message
    assert "json_schema:" in message and "function_calling:" in message and "text:" in message
    assert "\n" not in message
    assert "(no operator table" in server.requests[0].text()  # degraded gracefully before failing


# ----------------------------------------------------------------------------------------------
# Coder
# ----------------------------------------------------------------------------------------------


def test_write_returns_an_llm_candidate_from_a_fenced_answer_with_the_hybrid_start(
    server: StubServer,
) -> None:
    server.add(Reply.text(coder_answer()))
    candidate = make_policy(server).write(TASK, PLAN, 1)

    assert candidate.policy == "llm" and candidate.mode == "write" and candidate.id == 1
    assert candidate.source == RELU_SOLUTION
    assert candidate.summary == "a vectorised ReLU"
    assert candidate.covered_ops == ["relu"] and candidate.uncovered_ops == []
    assert candidate.meta["hybrid_start"] == "offered"
    assert candidate.meta["finish_reason"] == "stop"
    assert candidate.meta["tokens"] == {"input": 11, "output": 7}

    (request,) = server.requests
    assert "response_format" not in request.body and "tools" not in request.body
    system, user = request.body["messages"]
    assert system["role"] == "system" and "-gencode=arch=compute_90,code=sm_90" in system["content"]
    prompt = user["content"]
    assert "return torch.relu(x)" in prompt  # reference
    assert "g_relu [elementwise, covered]" in prompt and "Write the float4 ReLU kernel" in prompt  # plan
    assert "## Starting point" in prompt and OFFLINE_MARKER in prompt  # hybrid start
    assert 'name="stitch_relu_example"' in prompt  # the one-shot example solution


def test_write_without_hybrid_start_offers_no_starting_point(server: StubServer) -> None:
    server.add(Reply.text(coder_answer()))
    candidate = make_policy(server, hybrid_start=False).write(TASK, PLAN, 1)
    assert candidate.meta["hybrid_start"] == "off"
    assert "## Starting point" not in server.requests[0].text()


def test_write_degrades_when_the_offline_policy_is_missing(server: StubServer) -> None:
    server.add(Reply.text(coder_answer()))
    candidate = make_policy(server, offline=broken_offline).write(TASK, PLAN, 1)
    assert candidate.meta["hybrid_start"].startswith("offline policy unavailable (ImportError")
    assert OFFLINE_MARKER not in server.requests[0].text()


def test_write_survives_thinking_and_several_blocks(server: StubServer) -> None:
    answer = (
        "<think>float4 loads, tail kernel...</think>\nSummary: split kernels\n"
        "```cuda\n__global__ void relu_f4() {}\n```\n" + coder_answer(summary="ignored")
    )
    server.add(Reply.text(answer))
    candidate = make_policy(server).write(TASK, PLAN, 1)
    assert candidate.source == RELU_SOLUTION and candidate.summary == "split kernels"


def test_write_accepts_bare_code(server: StubServer) -> None:
    server.add(Reply.text("Here is the program.\n\n" + RELU_SOLUTION))
    candidate = make_policy(server).write(TASK, PLAN, 1)
    assert candidate.meta["form"] == "bare" and "class ModelNew" in candidate.source


def test_garbage_answer_raises_coder_output_error_with_parse_error_feedback(server: StubServer) -> None:
    server.add(Reply.text("As an AI, I think CUDA is great."))
    with pytest.raises(CoderOutputError) as info:
        make_policy(server).write(TASK, PLAN, 1)
    assert isinstance(info.value, PolicyOutputError)  # what the coder node catches
    feedback = info.value.feedback()
    assert feedback.kind == "parse_error" and "CUDA is great" in feedback.evidence


def test_truncated_answer_is_a_clear_coder_output_error(server: StubServer) -> None:
    server.add(Reply.text(coder_answer()[:900], finish_reason="length"))
    with pytest.raises(CoderOutputError, match="unterminated ```python block.*token limit"):
        make_policy(server).write(TASK, PLAN, 1)


def test_revise_carries_the_previous_program_and_the_feedback(server: StubServer) -> None:
    previous = Candidate(id=2, source=RELU_SOLUTION.replace("fmaxf", "fminf"), mode="write", policy="llm")
    feedback = Feedback(
        kind="wrong_output",
        summary="max abs error 1.0 at [3, 17]",
        evidence="expected 0.73, got 0.0 (fminf instead of fmaxf?)",
        suggestions=["use fmaxf(v, 0.f) in both kernels"],
    )
    server.add(Reply.text(coder_answer(summary="fmaxf restored")))
    candidate = make_policy(server).revise(TASK, PLAN, previous, feedback, "fix", 3)

    assert (candidate.id, candidate.parent, candidate.mode, candidate.policy) == (3, 2, "fix", "llm")
    assert candidate.summary == "fmaxf restored"
    assert "hybrid_start" not in candidate.meta
    prompt = server.requests[0].text()
    assert "# Fix candidate 2 of problem: 19_ReLU" in prompt
    assert "fminf(v.x, 0.f)" in prompt  # the previous program
    assert "max abs error 1.0 at [3, 17]" in prompt and "got 0.0 (fminf" in prompt  # summary, evidence
    assert "1. use fmaxf(v, 0.f) in both kernels" in prompt  # suggestions
    assert "return torch.relu(x)" in prompt and "g_relu" in prompt  # reference and plan


def test_optimize_mode_asks_for_speed(server: StubServer) -> None:
    previous = Candidate(id=1, source=RELU_SOLUTION, mode="write", policy="llm")
    feedback = Feedback(kind="optimize", summary="340 GB/s", suggestions=["more blocks"])
    server.add(Reply.text(coder_answer()))
    candidate = make_policy(server).revise(TASK, PLAN, previous, feedback, "optimize", 2)
    assert candidate.mode == "optimize"
    assert "# Speed up candidate 1" in server.requests[0].text()


# ----------------------------------------------------------------------------------------------
# Verifier
# ----------------------------------------------------------------------------------------------


def test_advise_returns_optimize_feedback_from_profile_diagnosis_and_notes(server: StubServer) -> None:
    server.add(Reply.json(ADVICE), Reply.json(ADVICE))
    candidate = Candidate(id=4, source=RELU_SOLUTION, mode="fix", policy="llm", summary="float4 ReLU")
    plan = PLAN.model_copy(update={"total_flops": 262_144, "total_bytes": 2_097_152})
    feedback = make_policy(server).advise(
        TASK, plan, candidate, PASSED, PROFILE, notes=["[note-vectorised-memory] use 16-byte loads"]
    )
    assert feedback.kind == "optimize"
    assert feedback.sources == ["note-vectorised-memory"]
    assert feedback.suggestions[0].startswith("launch enough blocks")

    (request,) = server.requests
    assert request.body["response_format"]["json_schema"]["name"] == "Feedback"
    prompt = request.text()
    assert "relu_f4: 1 call(s), 0.0123 ms (100%)" in prompt  # profile
    assert "speedup 1.22x" in prompt  # timing
    assert "170.5 GB/s of minimum traffic" in prompt  # the stand-in diagnosis from the plan's totals
    assert "[note-vectorised-memory] use 16-byte loads" in prompt  # retrieved notes
    assert "class ModelNew" in prompt  # the program

    make_policy(server).advise(TASK, plan, candidate, PASSED, PROFILE, diagnosis="DRAM-bound at 4% of peak")
    second = server.requests[1].text()
    assert "DRAM-bound at 4% of peak" in second and "GB/s of minimum traffic" not in second


def test_advise_garbage_becomes_advice_from_the_profile(server: StubServer) -> None:
    server.add(*[Reply.text("lgtm")] * 3)
    candidate = Candidate(id=4, source=RELU_SOLUTION, mode="write", policy="llm")
    feedback = make_policy(server).advise(TASK, PLAN, candidate, PASSED, PROFILE)
    assert feedback.kind == "optimize"
    assert feedback.summary.startswith("speed up relu_f4, 100% of the device time")
    assert "verifier model's answer was unusable" in feedback.evidence


# ----------------------------------------------------------------------------------------------
# Transport failures and settings
# ----------------------------------------------------------------------------------------------


def test_rate_limit_then_success_is_retried_by_the_client(server: StubServer) -> None:
    server.add(Reply.error(429, "slow down"), Reply.text(coder_answer()))
    candidate = make_policy(server, llm_max_retries=2).write(TASK, PLAN, 1)
    assert candidate.source == RELU_SOLUTION
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body  # the same request, retried


def test_repeated_server_errors_end_in_a_clear_call_error(server: StubServer) -> None:
    server.add(*[Reply.error(500, "CUDA out of memory in the model server")] * 2)
    with pytest.raises(LLMCallError) as info:
        make_policy(server, llm_max_retries=1).write(TASK, PLAN, 1)
    message = str(info.value)
    assert "coder model 'stub-model'" in message and server.url in message
    assert "server error 500 (2 attempts)" in message and "CUDA out of memory" in message
    assert len(server.requests) == 2 and server.pending == 0


def test_slow_answer_beyond_the_timeout_is_a_clear_call_error(server: StubServer) -> None:
    server.add(Reply.text(coder_answer(), delay_s=3.0))
    started = time.monotonic()
    with pytest.raises(LLMCallError, match=r"no answer within 0.3 s \(1 attempt\)"):
        make_policy(server, llm_timeout_s=0.3).write(TASK, PLAN, 1)
    assert time.monotonic() - started < 2.5


def test_unreadable_http_reply_is_a_call_error(server: StubServer) -> None:
    server.add(Reply.garbage())
    with pytest.raises(LLMCallError, match="unreadable reply"):
        make_policy(server).write(TASK, PLAN, 1)


def test_missing_api_key_is_a_settings_error_naming_the_variable_and_sends_nothing(
    server: StubServer,
) -> None:
    with pytest.raises(LLMSettingsError, match="environment variable OPENAI_API_KEY is not set"):
        make_policy(server, environ={}).write(TASK, PLAN, 1)
    with pytest.raises(LLMSettingsError, match="STITCHCUDA_CODER_KEY is not set"):
        make_policy(server, environ={}, llm_roles={"coder": {"api_key_env": "STITCHCUDA_CODER_KEY"}}).write(
            TASK, PLAN, 1
        )
    assert server.requests == []


def test_roles_can_use_different_servers_and_models(server: StubServer) -> None:
    with StubServer([Reply.text(coder_answer())], model="coder-model") as coder_server:
        server.add(Reply.json(RELU_PLAN))
        environ = {
            **KEY_ENV,
            "STITCHCUDA_CODER_BASE_URL": coder_server.url,
            "STITCHCUDA_CODER_MODEL": "qwen-coder",
        }
        policy = make_policy(server, environ=environ)
        plan = policy.plan(TASK, None)
        policy.write(TASK, plan, 1)
        assert [r.body["model"] for r in server.requests] == ["stub-model"]
        assert [r.body["model"] for r in coder_server.requests] == ["qwen-coder"]


def test_every_call_is_named_tagged_and_described_for_langsmith(server: StubServer) -> None:
    from langchain_core.tracers.context import collect_runs

    server.add(Reply.json(RELU_PLAN), Reply.text(coder_answer()))
    policy = make_policy(server)
    with collect_runs() as collector:
        policy.plan(TASK, None)
        policy.write(TASK, PLAN, 7)
    runs = {run.name: run for run in collector.traced_runs}
    assert set(runs) == {"stitchcuda.planner[json_schema]", "stitchcuda.coder.write"}
    coder_run = runs["stitchcuda.coder.write"]
    assert {"stitchcuda", "role:coder", "policy:llm", "problem:19_ReLU", "mode:write"} <= set(coder_run.tags)
    metadata = coder_run.extra["metadata"]
    assert (metadata["problem"], metadata["iteration"], metadata["role"], metadata["policy"]) == (
        "19_ReLU",
        7,
        "coder",
        "llm",
    )
    assert runs["stitchcuda.planner[json_schema]"].extra["metadata"]["role"] == "planner"


def test_the_policy_seam_builds_the_llm_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    policy = get_policy(Context(policy="llm", llm_model="m"))
    assert isinstance(policy, LLMPolicy) and policy.name == "llm"
    assert policy.settings("coder").model == "m"


def test_max_tokens_reaches_the_server_as_max_completion_tokens(server: StubServer) -> None:
    """Servers read either name (transformers serve, vLLM); the openai client sends the current one."""
    server.add(Reply.text(coder_answer()))
    make_policy(server, llm_max_tokens=321, llm_temperature=0.0).write(TASK, PLAN, 1)
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 321 and "max_tokens" not in body
    assert body["temperature"] == 0.0
