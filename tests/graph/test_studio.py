"""`langgraph dev` serves the StitchCUDA graph offline: assistants, graph, schemas and a whole run.

A real `langgraph dev` server (the API Studio talks to) runs on a free loopback port in the repo
root, and real runs go through it with langgraph-sdk: one with the offline policy, one with the LLM
policy answered by the stub OpenAI server (tests/support/llm_stub_server.py), whose URL reaches the graph
through the server's environment. Skips when the `studio` extra (langgraph-cli[inmem],
langgraph-sdk) is absent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, REPO
from support.llm_answers import SCALE_RELU_PLAN
from support.llm_stub_server import Reply, StubServer
from support.scripted_policy import OPTIMIZED
from support.serving import free_port

from graph.context import Context, context_fields
from graph.state import InputState

PROBLEM = str(FIXTURES / "problems" / "scale_relu.py")
START_LIMIT_S = 90.0
RUN_LIMIT_S = 240.0


def _langgraph_executable() -> str | None:
    if importlib.util.find_spec("langgraph_api") is None or importlib.util.find_spec("langgraph_sdk") is None:
        return None
    beside = Path(sys.executable).parent / "langgraph"
    return str(beside) if beside.exists() else shutil.which("langgraph")


LANGGRAPH = _langgraph_executable()
pytestmark = pytest.mark.skipif(
    LANGGRAPH is None,
    reason="langgraph-cli[inmem] and langgraph-sdk are not installed (python -m pip install -e '.[studio]')",
)


@dataclass
class DevServer:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path


def _wait_ok(server: DevServer) -> None:
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            pytest.fail(f"langgraph dev exited ({server.proc.returncode}):\n{server.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(server.url + "/ok", timeout=2) as response:
                if json.load(response).get("ok") is True:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"langgraph dev not up within {START_LIMIT_S:.0f} s:\n{server.log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def llm() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture(scope="module")
def dev(llm: StubServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """`langgraph dev` in the repo root, its model calls pointed at the stub server."""
    assert LANGGRAPH is not None
    port = free_port()
    log = tmp_path_factory.mktemp("studio") / "langgraph-dev.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env |= {
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        "STITCHCUDA_LLM_MODEL": "stub-model",
        "STITCHCUDA_LLM_BASE_URL": llm.url,
        "STITCHCUDA_LLM_MAX_RETRIES": "0",
        "STITCHCUDA_LLM_TIMEOUT_S": "60",
        "OPENAI_API_KEY": "EMPTY",
    }
    command = [LANGGRAPH, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = DevServer(url=f"http://127.0.0.1:{port}", proc=proc, log=log)
    try:
        _wait_ok(server)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def client(dev: DevServer) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=dev.url, api_key=None, timeout=(5.0, RUN_LIMIT_S, 30.0, 5.0))


@pytest.fixture(scope="module")
def assistant(client: Any) -> dict[str, Any]:
    (found,) = client.assistants.search(graph_id="stitchcuda")
    return found


def test_the_server_lists_our_assistant(assistant: dict[str, Any]) -> None:
    assert assistant["graph_id"] == "stitchcuda"
    assert assistant["name"] == "StitchCUDA"


def test_the_graph_has_our_nodes_and_edges(client: Any, assistant: dict[str, Any]) -> None:
    drawing = client.assistants.get_graph(assistant["assistant_id"])
    nodes = {node["id"] for node in drawing["nodes"]}
    assert nodes == {"__start__", "planner", "coder", "verifier", "profiler", "finalize", "__end__"}
    edges = {(edge["source"], edge["target"]) for edge in drawing["edges"]}
    assert {
        ("__start__", "planner"),
        ("coder", "coder"),  # the fix branch after an unusable answer
        ("verifier", "coder"),
        ("verifier", "profiler"),
        ("profiler", "coder"),
        ("finalize", "__end__"),
    } <= edges


def test_the_context_schema_is_our_context(client: Any, assistant: dict[str, Any]) -> None:
    schemas = client.assistants.get_schemas(assistant["assistant_id"])
    properties = schemas["context_schema"]["properties"]
    assert set(properties) == {f.name for f in fields(Context)}
    descriptions = context_fields()
    assert properties["max_iterations"]["description"] == descriptions["max_iterations"]
    assert properties["device"]["enum"] == ["cuda", "cpu"]


@pytest.mark.xfail(
    sys.version_info < (3, 12) and type(InputState).__module__ == "typing",
    reason="graph/state.py uses typing.TypedDict; pydantic needs typing_extensions.TypedDict on Python < 3.12, "
    "so the server cannot render the input and output schemas",
    strict=True,
)
def test_the_input_and_output_schemas_render(client: Any, assistant: dict[str, Any]) -> None:
    schemas = client.assistants.get_schemas(assistant["assistant_id"])
    assert schemas["input_schema"] is not None and "problem_path" in schemas["input_schema"]["properties"]
    assert schemas["output_schema"] is not None and "status" in schemas["output_schema"]["properties"]


@pytest.mark.slow
def test_the_offline_policy_runs_a_problem_through_the_api(client: Any, assistant: dict[str, Any]) -> None:
    """No model at all: plan, CUDA program and nvcc build; verified on a GPU, unverified without one."""
    import torch

    thread = client.threads.create()
    result = client.runs.wait(
        thread["thread_id"],
        assistant["assistant_id"],
        input={"problem_path": PROBLEM},
        context={"policy": "offline", "max_iterations": 3, "perf_trials": 5},
    )
    expected = "verified" if torch.cuda.is_available() else "unverified"
    assert result["status"] == expected, result.get("status_reason")
    report = result["report"]
    assert report["policy"] == "offline" and report["problem"] == "scale_relu"
    assert report["attempts"] and report["attempts"][0]["mode"] == "write"
    state = client.threads.get_state(thread["thread_id"])
    assert "class ModelNew" in state["values"]["candidate"]["source"]
    assert state["values"]["log"][-1].startswith(f"finalize: {expected}")


@pytest.mark.slow
def test_the_llm_policy_runs_a_problem_through_the_api(
    client: Any, assistant: dict[str, Any], llm: StubServer
) -> None:
    program = f"Summary: torch ops\n\n```python\n{OPTIMIZED}```\n"
    advice = {"kind": "optimize", "summary": "fuse the three ops", "suggestions": ["one pass over x"]}
    llm.add(Reply.json(SCALE_RELU_PLAN), Reply.text(program), Reply.json(advice), Reply.text(program))
    seen = len(llm.requests)
    thread = client.threads.create()
    result = client.runs.wait(
        thread["thread_id"],
        assistant["assistant_id"],
        input={"problem_path": PROBLEM},
        context={
            "policy": "llm",
            "device": "cpu",
            "correctness_trials": 2,
            "perf_trials": 5,
            "max_optimize_rounds": 1,
        },
    )
    assert result["status"] == "verified", result.get("status_reason")
    assert result["best"]["candidate"]["source"].strip() == OPTIMIZED.strip()
    assert result["report"]["policy"] == "llm" and result["report"]["problem"] == "scale_relu"

    state = client.threads.get_state(thread["thread_id"])
    assert state["next"] == []
    logs = state["values"]["log"]
    assert logs[0].startswith("planner: scale_relu")
    assert any(line.startswith("verifier: candidate 1 passed") for line in logs)
    assert logs[-1].startswith("finalize: verified")

    requests = llm.requests[seen:]
    assert len(requests) == 4 and llm.pending == 0  # plan, write, advice, optimise (nothing new)
    assert requests[0].body["response_format"]["json_schema"]["name"] == "Plan"
    write_prompt = requests[1].text()
    assert "torch.relu(x - 0.5) * self.scale" in write_prompt
    assert "## Starting point" in write_prompt  # hybrid start: the offline program is offered
