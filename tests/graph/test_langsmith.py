"""LangSmith tracing of whole runs: names, tags and metadata, and no stall when LangSmith is unreachable.

The CLI runs in a subprocess (langsmith keeps one client per process and reads its settings from the
environment once) with the LLM policy answered by the stub OpenAI server (tests/support/llm_stub_server.py).
LangSmith is played by two loopback servers written here: one that records the multipart ingest
the real client posts, and a black hole that accepts connections and never answers, the case that
stalled process exit for minutes before graph/tracing.py bounded it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, REPO
from support.llm_answers import SCALE_RELU_PLAN
from support.llm_stub_server import Reply, StubServer
from support.recording_langsmith import RecordingLangSmith
from support.scripted_policy import OPTIMIZED

from graph.context import Context
from graph.tracing import TraceLimits, run_config, tracing_enabled

PROBLEM = str(FIXTURES / "problems" / "scale_relu.py")
FLUSH_S = 4.0
RUN_LIMIT_S = 300.0  # the whole CLI run, planner to exit; it takes about 30 s here

ADVICE = {"kind": "optimize", "summary": "fuse the three ops", "suggestions": ["one pass over x"]}


def program_answer(summary: str) -> str:
    return f"Summary: {summary}\n\n```python\n{OPTIMIZED}```\n"


def llm_script() -> list[Reply]:
    """plan, program (passes on the CPU), advice, the same program again (nothing new: finalize)."""
    return [
        Reply.json(SCALE_RELU_PLAN),
        Reply.text(program_answer("torch ops, clamp_min")),
        Reply.json(ADVICE),
        Reply.text(program_answer("nothing better")),
    ]


# ----------------------------------------------------------------------------------------------
# Loopback LangSmith servers
# ----------------------------------------------------------------------------------------------


class BlackHole:
    """Accepts TCP connections and never answers (a firewall that drops packets after the handshake)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(conn)

    def __enter__(self) -> BlackHole:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


# ----------------------------------------------------------------------------------------------
# The CLI in a subprocess
# ----------------------------------------------------------------------------------------------


def cli_env(llm: StubServer, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env |= {
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_ENDPOINT": endpoint,
        "LANGSMITH_API_KEY": "lsv2-test-key",
        "LANGSMITH_PROJECT": "stitchcuda-tests",
        "STITCHCUDA_LANGSMITH_FLUSH_S": str(FLUSH_S),
        "STITCHCUDA_LLM_MODEL": "stub-model",
        "STITCHCUDA_LLM_BASE_URL": llm.url,
        "STITCHCUDA_LLM_MAX_RETRIES": "0",
        "STITCHCUDA_LLM_TIMEOUT_S": "60",
        "OPENAI_API_KEY": "EMPTY",
        "PYTHONUNBUFFERED": "1",
    }
    return env


class CliRun:
    """One `stitchcuda run` in a subprocess, with the time its last stdout line and its exit came."""

    def __init__(self, out: Path, env: dict[str, str]) -> None:
        self.out = out
        self.stderr_path = out.parent / f"{out.name}.stderr"
        self.lines: list[tuple[float, str]] = []
        command = [
            sys.executable, "-m", "graph.cli", "run", PROBLEM,
            "--policy", "llm", "--device", "cpu", "--perf-trials", "5", "--quiet",
            "--out", str(out), "--thread", "trace-test", "--tag", "ci", "--experiment", "exp-1",
        ]  # fmt: skip
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.strip()))

    def wait(self, limit_s: float) -> tuple[int, float]:
        """(exit code, exit time); the process is killed if it outlives `limit_s`."""
        try:
            code = self.proc.wait(timeout=limit_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
        exited = time.monotonic()
        self._reader.join(timeout=5)
        return code, exited

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def summary(self) -> dict[str, Any]:
        assert self.lines, f"the CLI printed nothing; stderr:\n{self.stderr[-3000:]}"
        return json.loads(self.lines[-1][1])


@pytest.fixture
def llm() -> Iterator[StubServer]:
    with StubServer(llm_script()) as server:
        yield server


# ----------------------------------------------------------------------------------------------
# Tests
# ----------------------------------------------------------------------------------------------


def test_run_config_names_tags_and_describes_the_run() -> None:
    context = Context(policy="llm", device="cpu", gpu_arch="sm_80", max_iterations=4)
    config = run_config(
        "19_ReLU",
        policy="llm",
        thread_id="abc",
        level="level1",
        context=context,
        tags=["nightly", "policy:llm"],
        experiment="exp-7",
        metadata={"commit": "deadbeef"},
    )
    assert config["run_name"] == "stitchcuda:19_ReLU"
    assert config["tags"] == [
        "stitchcuda", "problem:19_ReLU", "policy:llm", "level:level1", "experiment:exp-7", "nightly",
    ]  # fmt: skip
    assert config["metadata"] == {
        "problem": "19_ReLU",
        "policy": "llm",
        "level": "level1",
        "experiment": "exp-7",
        "thread_id": "abc",
        "device": "cpu",
        "gpu_arch": "sm_80",
        "max_iterations": 4,
        "hybrid_start": True,
        "commit": "deadbeef",
    }
    json.dumps(config)  # plain data: it lands in checkpoints and traces


def test_tracing_switch_and_limits_come_from_the_environment() -> None:
    assert tracing_enabled({"LANGSMITH_TRACING": "true"})
    assert tracing_enabled({"LANGCHAIN_TRACING_V2": "True"})
    assert not tracing_enabled({"LANGSMITH_TRACING": "false"})
    assert not tracing_enabled({"LANGSMITH_TRACING": "1"})  # langsmith itself accepts only "true"
    assert not tracing_enabled({})
    limits = TraceLimits.from_env({"STITCHCUDA_LANGSMITH_FLUSH_S": "2.5", "STITCHCUDA_LANGSMITH_READ_S": "x"})
    assert limits.flush_s == 2.5 and limits.read_s == TraceLimits().read_s


@pytest.mark.slow
def test_unreachable_langsmith_neither_fails_nor_stalls_the_run(llm: StubServer, tmp_path: Path) -> None:
    with BlackHole() as hole:
        run = CliRun(tmp_path / "out", cli_env(llm, hole.url))
        try:
            code, exited = run.wait(RUN_LIMIT_S)
        finally:
            run.stop()
        assert hole.accepted, "the client never tried to reach LangSmith: tracing was not on"

    summary = run.summary()
    assert code == 0, run.stderr[-3000:]
    assert summary["status"] == "verified" and summary["problem"] == "scale_relu"
    lag = exited - run.lines[-1][0]
    # The bounded flush (FLUSH_S) plus interpreter teardown; langsmith's defaults took over 3 minutes.
    assert lag < FLUSH_S + 10.0, f"exit took {lag:.1f} s after the result"
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["status"] == "verified" and report["attempts"][0]["status"] == "passed"
    assert (tmp_path / "out" / "solution.py").read_text().strip() == OPTIMIZED.strip()
    assert "Traceback" not in run.stderr
    assert llm.pending == 0


@pytest.mark.slow
def test_posted_runs_carry_our_names_tags_and_metadata(llm: StubServer, tmp_path: Path) -> None:
    with RecordingLangSmith() as smith:
        run = CliRun(tmp_path / "out", cli_env(llm, smith.url))
        try:
            code, _ = run.wait(RUN_LIMIT_S)
        finally:
            run.stop()
    assert code == 0, run.stderr[-3000:]
    assert ("POST", "/runs/multipart") in smith.requests
    assert smith.api_keys == {"lsv2-test-key"}

    (root,) = smith.runs_named("stitchcuda:scale_relu")
    assert {"stitchcuda", "problem:scale_relu", "policy:llm", "experiment:exp-1", "ci"} <= set(root["tags"])
    root_meta = root["extra"]["metadata"]
    assert (root_meta["problem"], root_meta["policy"], root_meta["thread_id"]) == (
        "scale_relu",
        "llm",
        "trace-test",
    )
    assert root_meta["experiment"] == "exp-1" and root_meta["device"] == "cpu"
    assert root["session_name"] == "stitchcuda-tests"
    assert root["outputs"]["status"] == "verified"  # the closing patch arrived: the flush completed

    trace = [r for r in smith.posts.values() if r.get("trace_id") == root["id"]]
    nodes = {r["name"] for r in trace if r.get("extra", {}).get("metadata", {}).get("langgraph_node")}
    assert {"planner", "coder", "verifier", "profiler", "finalize"} <= nodes
    planner_node = smith.runs_named("planner")[0]
    assert planner_node["extra"]["metadata"]["problem"] == "scale_relu"  # inherited from the root
    assert "experiment:exp-1" in planner_node["tags"]

    model_runs = {r["name"]: r for r in trace if "role" in r.get("extra", {}).get("metadata", {})}
    assert {
        "stitchcuda.planner[json_schema]",
        "stitchcuda.coder.write",
        "stitchcuda.verifier[json_schema]",
        "stitchcuda.coder.optimize",
    } <= set(model_runs)
    write = model_runs["stitchcuda.coder.write"]
    meta = write["extra"]["metadata"]
    assert (meta["role"], meta["iteration"], meta["policy"], meta["problem"], meta["mode"]) == (
        "coder",
        1,
        "llm",
        "scale_relu",
        "write",
    )
    assert {"role:coder", "mode:write", "policy:llm"} <= set(write["tags"])
    assert model_runs["stitchcuda.coder.optimize"]["extra"]["metadata"]["iteration"] == 2
    assert model_runs["stitchcuda.verifier[json_schema]"]["extra"]["metadata"]["role"] == "verifier"
