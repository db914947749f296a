"""The whole graph with the LLM policy, its models played by the stub OpenAI server.

Everything between the graph and the socket is real: the nodes, routers and the LLM policy (prompts,
structured output, code extraction) over langchain-openai; the worker subprocess, the g++ build of
the C++ candidate, correctness and timing on the CPU (Context.device="cpu"). Each test scripts the
models' answers, then checks both directions: what every request carried (prompt sections, schema)
and which edge each answer made the graph take.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import FIXTURES, REPO
from langgraph.checkpoint.memory import InMemorySaver
from support.llm_answers import SCALE_RELU_PLAN, coder_answer
from support.llm_stub_server import RecordedRequest, Reply, StubServer, isolate_model_settings
from support.scripted_policy import BUILD_ERROR, CORRECT_CPP, OPTIMIZED

from graph.build import builder
from graph.context import Context
from graph.policy import register_policy, unregister_policy
from nodes.llm.policy import LLMPolicy

PROBLEM = str(FIXTURES / "problems" / "scale_relu.py")
GARBAGE = "I am sorry, but as a language model I prefer to describe the kernel in words."

ADVICE_1 = {
    "kind": "optimize",
    "summary": "the scalar C++ loop reads x once but runs on one core",
    "evidence": "one kernel launch per forward",
    "suggestions": ["let PyTorch's vectorised ops do the three steps", "avoid the extra empty_like"],
}
ADVICE_2 = {"kind": "optimize", "summary": "three aten kernels now; fuse them", "suggestions": ["fuse"]}


@pytest.fixture(autouse=True)
def _model_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_model_settings(monkeypatch)


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as stub:
        yield stub


def llm_context(server: StubServer, **overrides: Any) -> Context:
    settings: dict[str, Any] = dict(
        policy="llm",
        llm_model="stub-model",
        llm_base_url=server.url,
        llm_timeout_s=60.0,
        llm_max_retries=0,
        hybrid_start=False,  # the prompts must not depend on whether codegen's offline policy exists
        device="cpu",
        correctness_trials=2,
        perf_trials=5,
        eval_timeout_s=300.0,
        max_iterations=6,
        max_fix_attempts=3,
        max_optimize_rounds=1,
    )
    settings.update(overrides)
    return Context(**settings)


def run(context: Context) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """Final state and the (node, update) steps in order."""
    app = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "llm-graph"}, "recursion_limit": 60}
    steps: list[tuple[str, dict[str, Any]]] = []
    for chunk in app.stream({"problem_path": PROBLEM}, config, context=context, stream_mode="updates"):
        steps.extend((node, update or {}) for node, update in chunk.items())
    return app.get_state(config).values, steps


def nodes(steps: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [node for node, _ in steps]


def user_prompt(request: RecordedRequest) -> str:
    return request.body["messages"][-1]["content"]


def section(prompt: str, title: str) -> str:
    """The text of one '## title' section of a prompt."""
    start = prompt.index(f"## {title}")
    end = prompt.find("\n## ", start + 3)
    return prompt[start : end if end != -1 else None]


@pytest.mark.slow
def test_fix_and_optimise_loop_with_every_failure_on_its_edge(server: StubServer) -> None:
    server.add(
        Reply.json(SCALE_RELU_PLAN),
        Reply.text(coder_answer(BUILD_ERROR, "a first C++ extension")),  # -> build_error -> fix
        Reply.text(GARBAGE),  # -> parse_error -> fix (coder -> coder)
        Reply.text(coder_answer(CORRECT_CPP, "fixed the C++ syntax")),  # -> passed -> profile
        Reply.json(ADVICE_1),  # verifier advice -> optimize
        Reply.text(coder_answer(OPTIMIZED, "vectorised torch ops")),  # -> passed -> profile -> rounds spent
        Reply.json(ADVICE_2),
    )
    state, steps = run(llm_context(server))

    assert nodes(steps) == [
        "planner",
        "coder", "verifier",  # build error: fix branch
        "coder",  # garbage: straight back to the coder with the parse error
        "coder", "verifier", "profiler",  # passed: profile, advice, optimise
        "coder", "verifier", "profiler",  # passed again: one optimisation round allowed, so finalize
        "finalize",
    ]  # fmt: skip
    updates = [update for _, update in steps]
    assert updates[2]["coder_mode"] == "fix" and updates[2]["feedback"]["kind"] == "build_error"
    assert updates[3]["coder_outcome"] == "policy_error" and updates[3]["feedback"]["kind"] == "parse_error"
    assert updates[6]["coder_mode"] == "optimize" and updates[6]["feedback"]["summary"] == ADVICE_1["summary"]
    assert [a["status"] for a in state["history"]] == ["build_error", "passed", "passed"]
    assert [a["candidate"] for a in state["history"]] == [1, 3, 4]  # turn 2 produced no candidate
    assert state["status"] == "verified"
    assert state["best"]["candidate"]["id"] in (3, 4) and state["best"]["candidate"]["policy"] == "llm"
    assert state["report"]["iterations"] == 4

    assert server.pending == 0 and len(server.requests) == 7
    plan_req, write_req, fix1_req, fix2_req, advise1_req, optimize_req, advise2_req = server.requests

    # planner: structured output by json_schema, with the reference program
    assert plan_req.body["response_format"]["json_schema"]["name"] == "Plan"
    assert "return torch.relu(x - 0.5) * self.scale" in user_prompt(plan_req)

    # coder, skill 1: free text (no schema), the plan and the reference
    assert "response_format" not in write_req.body and "tools" not in write_req.body
    prompt = user_prompt(write_req)
    assert prompt.startswith("# Write the program for problem: scale_relu")
    assert "Write the fused sub+relu+mul kernel" in section(prompt, "Plan")
    assert "## Starting point" not in prompt

    # coder, skill 2 after the build error: the broken program and the compiler's evidence
    prompt = user_prompt(fix1_req)
    assert prompt.startswith("# Fix candidate 1 of problem: scale_relu")
    assert "int broken( { return 0; }" in section(prompt, "Your previous program")
    evidence = section(prompt, "Verifier feedback (build_error)")
    assert "error" in evidence and "the extension did not build" in evidence

    # after the garbage: the same program to fix, now with the unusable answer as evidence
    prompt = user_prompt(fix2_req)
    assert prompt.startswith("# Fix candidate 1 of problem: scale_relu")
    feedback = section(prompt, "Verifier feedback (parse_error)")
    assert "no code defining class ModelNew" in feedback and "as a language model" in feedback

    # verifier: structured Feedback from the passing candidate's timing and profile
    assert advise1_req.body["response_format"]["json_schema"]["name"] == "Feedback"
    prompt = user_prompt(advise1_req)
    assert prompt.startswith("# Advise on candidate 3 of problem: scale_relu")
    assert "status passed; 2/2 correctness trials passed" in section(prompt, "Timing")
    assert "kernel launches" in section(prompt, "Profile")
    assert "scripted_scale_relu" in section(prompt, "The program")

    # coder, skill 2 optimise: the verified program and the verifier's advice
    prompt = user_prompt(optimize_req)
    assert prompt.startswith("# Speed up candidate 3 of problem: scale_relu")
    advice = section(prompt, "Verifier feedback (optimize)")
    assert ADVICE_1["summary"] in advice and "1. let PyTorch's vectorised ops do the three steps" in advice
    assert user_prompt(advise2_req).startswith("# Advise on candidate 4 of problem: scale_relu")


def test_repeated_garbage_without_a_program_ends_failed(server: StubServer) -> None:
    server.add(Reply.json(SCALE_RELU_PLAN), *[Reply.text(GARBAGE)] * 3)
    state, steps = run(llm_context(server))

    assert nodes(steps) == ["planner", "coder", "coder", "coder", "finalize"]
    assert state["status"] == "failed"
    assert (
        state["status_reason"]
        == "no verified program; last outcome policy_error; 3 fix attempts in a row failed"
    )
    assert state["report"]["iterations"] == 3 and state["best"] is None
    assert server.pending == 0
    # Every request is in the state and the report, with what became of it.
    calls = state["model_calls"]
    assert [(c["role"], c["outcome"]) for c in calls] == [("planner", "parsed")] + [("coder", "rejected")] * 3
    assert [c["candidate"] for c in calls[1:]] == [1, 2, 3] and calls[0]["method"] == "json_schema"
    assert all("no code defining class ModelNew" in c["detail"] for c in calls[1:])
    assert state["report"]["model_calls"] == calls
    assert state["report"]["model_call_summary"]["outcomes"]["rejected"] == 3
    # No program exists yet, so every retry is a fresh skill-1 request, carrying why the last failed.
    assert all(user_prompt(r).startswith("# Write the program") for r in server.requests[1:])
    assert "could not be used" not in user_prompt(server.requests[1])
    for retry in server.requests[2:]:
        assert "Summary:" in section(user_prompt(retry), "Your previous answer could not be used")


def test_repeated_garbage_while_optimising_keeps_the_verified_program(server: StubServer) -> None:
    server.add(
        Reply.json(SCALE_RELU_PLAN),
        Reply.text(coder_answer(OPTIMIZED, "torch ops")),
        Reply.json(ADVICE_2),
        *[Reply.text(GARBAGE)] * 3,
    )
    state, steps = run(llm_context(server, max_optimize_rounds=2))

    assert nodes(steps) == ["planner", "coder", "verifier", "profiler", "coder", "coder", "coder", "finalize"]
    assert [update.get("coder_outcome") for node, update in steps if node == "coder"] == [
        "candidate",
        "policy_error",
        "policy_error",
        "policy_error",
    ]
    assert state["status"] == "verified"
    assert (
        state["best"]["candidate"]["id"] == 1
        and state["best"]["candidate"]["source"].strip() == OPTIMIZED.strip()
    )
    assert state["report"]["candidate_id"] == 1
    optimise_1, optimise_2, optimise_3 = server.requests[3:]
    assert "## Verifier feedback (optimize)" in user_prompt(optimise_1)
    for request in (optimise_2, optimise_3):  # later turns see why the previous answer was unusable
        prompt = user_prompt(request)
        assert prompt.startswith("# Speed up candidate 1") and "## Verifier feedback (parse_error)" in prompt


def test_an_endpoint_failure_ends_the_run_with_the_best_program_kept(server: StubServer) -> None:
    server.add(
        Reply.json(SCALE_RELU_PLAN),
        Reply.text(coder_answer(OPTIMIZED, "torch ops")),
        Reply.json(ADVICE_2),
        Reply.error(500, "model server out of memory"),
    )
    state, steps = run(llm_context(server))

    assert nodes(steps) == ["planner", "coder", "verifier", "profiler", "coder", "finalize"]
    assert steps[-2][1]["coder_outcome"] == "policy_unavailable"
    assert state["status"] == "verified"
    reason = state["status_reason"]
    assert reason.startswith("candidate 1 passed 2 correctness trials; stopped: the coder is")
    assert "server error 500" in reason and "model server out of memory" in reason
    assert state["best"]["candidate"]["id"] == 1


def test_unusable_plan_without_offline_fallback_ends_failed(server: StubServer) -> None:
    def no_offline(context: Context) -> Any:
        raise ImportError("offline policy switched off for this test")

    register_policy("llm-no-offline", lambda context: LLMPolicy(context, offline_factory=no_offline))
    try:
        server.add(*[Reply.text("Plan? Just write fast code.")] * 3)
        state, steps = run(llm_context(server, policy="llm-no-offline"))
    finally:
        unregister_policy("llm-no-offline")
    assert nodes(steps) == ["planner", "finalize"]
    assert state["status"] == "failed" and "Plan" in state["status_reason"]


def test_the_recorded_trajectory_matches_the_current_graph() -> None:
    """docs/trajectory.md (python docs/make_trajectory.py) must be regenerated when the graph changes."""
    from graph.build import graph

    text = (REPO / "docs" / "trajectory.md").read_text()
    assert f"```mermaid\n{graph.get_graph().draw_mermaid().strip()}\n```" in text
    for decision in ("→ **fix** (`coder`)", "→ **profile** (`profiler`)", "→ **optimize** (`coder`)"):
        assert decision in text
    assert "## Verifier feedback (build_error)" in text and "## Verifier feedback (parse_error)" in text
    assert "Report: status **verified**" in text
