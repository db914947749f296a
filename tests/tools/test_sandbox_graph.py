"""Issue 20 end to end: the LLM policy's coder (the stub OpenAI server) answers a program that
reads the environment, writes it outside its work directory and sends it to 127.0.0.1.

Everything is real except the model: the graph, langchain-openai over HTTP, the sandboxed worker,
the g++ build, correctness and timing on the CPU. Before the sandbox this program delivered
OPENAI_API_KEY and LANGSMITH_API_KEY; now nothing reaches the listener or the file, the attempt
is reported, and the run never reports the program verified although it computes the right answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, REPO
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from support.listener import Listener
from support.llm_answers import SCALE_RELU_PLAN
from support.llm_stub_server import Reply, StubServer
from support.scripted_policy import CORRECT_CPP

from graph.build import builder
from graph.context import Context

SECRET = "sk-planted-issue20-77c1"


@pytest.mark.slow
def test_the_issue20_program_steals_nothing_and_is_never_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "LANGSMITH_API_KEY"):
        monkeypatch.setenv(name, SECRET)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    target = tmp_path / "loot.txt"
    listener = Listener()
    prelude = (REPO / "tests" / "candidates" / "sandbox" / "issue20_exfil.py").read_text()
    program = prelude.replace("__TARGET__", str(target)).replace("__PORT__", str(listener.port)) + CORRECT_CPP
    try:
        with StubServer(
            [Reply.json(SCALE_RELU_PLAN), Reply.text(f"Summary: fused\n\n```python\n{program}```\n")]
        ) as server:
            context = Context(
                policy="llm", llm_model="stub", llm_base_url=server.url, llm_timeout_s=60.0, llm_max_retries=0,
                hybrid_start=False, device="cpu", correctness_trials=2, perf_trials=5, eval_timeout_s=300.0,
                max_iterations=1, sandbox="required",
            )  # fmt: skip
            app = builder.compile(checkpointer=InMemorySaver())
            config: RunnableConfig = {"configurable": {"thread_id": "issue20"}, "recursion_limit": 30}
            problem = {"problem_path": str(FIXTURES / "problems" / "scale_relu.py")}
            app.invoke(problem, config, context=context)  # type: ignore[call-overload]  # builder's context type
            state = app.get_state(config).values
    finally:
        listener.close()
    assert listener.connections == 0 and not listener.received
    assert not target.exists()
    test = state["test"]
    assert test["status"] == "passed"  # the right answer ...
    assert test["verdict"] == "hacked"  # ... from a program that is never kept
    evidence = [f["evidence"] for f in test["findings"] if f["id"] == "sandbox_violation"]
    assert any(e.startswith("write: opened " + str(target)) for e in evidence), evidence
    assert any(e.startswith("network: socket(AF_INET") for e in evidence), evidence
    assert state["report"]["status"] != "verified" and state.get("best") is None
    assert state["report"]["sandbox"]["mode"] == "required"
