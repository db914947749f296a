"""Every graph run keeps its coder turns, with either policy, and they become skill rows.

- The LLM policy, its model played by the stub OpenAI server on 127.0.0.1: each recorded turn holds
  exactly the messages the coder's request carried over the socket and exactly the model's answer,
  including an answer the graph could not use.
- The offline policy from the command line (`stitchcuda run`, then `stitchcuda rl dataset` and
  `stitchcuda rl score`, as docs/rl.md gives them): its turn carries the messages an LLM coder gets
  with hybrid start off, which never contain the answer.

Everything but the model is real: the nodes, the prompts, the worker process, g++/nvcc builds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES
from langgraph.checkpoint.memory import InMemorySaver
from support.llm_answers import SCALE_RELU_PLAN, coder_answer
from support.llm_stub_server import Reply, StubServer, isolate_model_settings
from support.scripted_policy import BUILD_ERROR, CORRECT_CPP

from graph.artifacts import Plan, Task
from graph.build import builder
from graph.context import Context
from nodes.llm import prompting
from nodes.support.turn_log import TURNS_FILE, chat_messages
from rl.dataset import read_rows, write_dataset

REPO = Path(__file__).resolve().parents[2]
PROBLEM = str(FIXTURES / "problems" / "scale_relu.py")
GARBAGE = "Sure! The kernel subtracts 0.5, applies a ReLU and scales; I will describe it in words."
ADVICE = {"kind": "optimize", "summary": "one scalar loop", "suggestions": ["vectorise"]}


@pytest.fixture
def _model_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_model_settings(monkeypatch)


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / TURNS_FILE).read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.usefixtures("_model_environment")
def test_llm_policy_turns_hold_the_exact_exchange_and_become_rows(tmp_path: Path) -> None:
    replies = [
        coder_answer(BUILD_ERROR, "a first C++ extension"),  # write -> build error -> fix
        GARBAGE,  # fix -> unusable -> fix again (an error turn)
        coder_answer(CORRECT_CPP, "fixed the C++ syntax"),  # fix -> passed -> profile -> finalize
    ]
    out = tmp_path / "run"
    with StubServer([Reply.json(SCALE_RELU_PLAN), *map(Reply.text, replies), Reply.json(ADVICE)]) as server:
        context = Context(
            policy="llm",
            llm_model="stub-model",
            llm_base_url=server.url,
            llm_timeout_s=60.0,
            llm_max_retries=0,
            hybrid_start=False,
            device="cpu",
            correctness_trials=2,
            perf_trials=5,
            eval_timeout_s=300.0,
            max_iterations=4,
            max_fix_attempts=3,
            max_optimize_rounds=0,
            out_dir=str(out),
        )
        app = builder.compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "llm-turns"}, "recursion_limit": 60}
        state = app.invoke({"problem_path": PROBLEM}, config, context=context)
        sent = list(server.requests)
    assert state["status"] == "verified"

    lines = records(out)
    turns = [r for r in lines if r["type"] == "turn"]
    assert [(t["skill"], t["mode"], t["policy"]) for t in turns] == [
        ("write", "write", "llm"),
        ("revise", "fix", "llm"),
        ("revise", "fix", "llm"),
    ]
    coder_requests = sent[1:4]  # after the planner's; the verifier's advice comes last
    for turn, request, reply in zip(turns, coder_requests, replies, strict=True):
        over_the_wire = [{"role": m["role"], "content": m["content"]} for m in request.body["messages"]]
        assert turn["messages"] == over_the_wire
        assert turn["answer"] == reply
    assert turns[1]["error"] and turns[1]["program"] is None and turns[1]["previous"]["id"] == 1
    assert turns[2]["feedback"]["kind"] == "parse_error" and GARBAGE in json.dumps(turns[2]["feedback"])
    outcomes = {r["candidate"]: r["status"] for r in lines if r["type"] == "outcome"}
    assert outcomes == {1: "build_error", turns[2]["candidate"]: "passed"}

    stats = write_dataset([out], tmp_path / "ds")
    assert stats.rows == {"write": 1, "revise": 2} and stats.references == 1
    (write_row,) = read_rows(tmp_path / "ds" / "skill1.jsonl")
    unusable, fixed = read_rows(tmp_path / "ds" / "skill2.jsonl")
    assert write_row["outcome"]["status"] == "build_error" and write_row["provenance"]["policy"] == "llm"
    assert unusable["outcome"]["status"] == "policy_error" and unusable["answer"] == GARBAGE
    assert unusable["previous_outcome"]["status"] == "build_error"
    assert fixed["outcome"]["status"] == "passed" and json.loads(fixed["feedback"])["kind"] == "parse_error"
    assert CORRECT_CPP.strip() in fixed["program"]
    assert {r["reference_program"] for r in (write_row, unusable, fixed)} == {fixed["program"]}


@pytest.mark.slow
def test_offline_run_from_the_command_line_becomes_a_scored_skill1_row(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "graph.cli", *args],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip

    run_dir = tmp_path / "runs" / "scale_relu"
    ran = cli("run", PROBLEM, "--out", str(run_dir), "--quiet")
    assert ran.returncode in (0, 3), ran.stderr[-2000:]  # 3: built, but no GPU here to run it
    built = cli("rl", "dataset", str(tmp_path / "runs"), "--out", str(tmp_path / "ds"))
    assert built.returncode == 0, built.stderr[-2000:]

    head = next(r for r in records(run_dir) if r["type"] == "run")
    rows = read_rows(tmp_path / "ds" / "skill1.jsonl")
    (row,) = rows
    assert row["provenance"]["policy"] == "offline" and row["problem_name"] == "scale_relu"
    task = Task(name=head["problem"]["name"], path=head["problem"]["path"], source=head["problem"]["source"])
    llm_coder_gets = prompting.coder_write_messages(
        Context(gpu_arch=head["gpu_arch"]), task, Plan.model_validate(head["plan"]), None
    )
    assert row["prompt"] == chat_messages(llm_coder_gets)
    assert row["program"] and row["program"].strip() not in json.dumps(row["prompt"])  # hybrid start off
    assert row["answer"].startswith("Summary: ") and row["program"].strip() in row["answer"]

    completion = tmp_path / "answer.md"
    completion.write_text(row["answer"])
    scored = cli("rl", "score", "--problem", PROBLEM, "--completion", str(completion), "--skill", "write")
    assert scored.returncode == 0, scored.stderr[-2000:]
    result = json.loads(scored.stdout)
    assert not result["hacked"] and result["total"] > 0, result["evidence"]
    assert result["rubric"]["skill_compliance"]["score"] == 1.0, result["rubric"]["skill_compliance"]
    if row["outcome"]["status"] == "no_gpu":  # this machine has no GPU: the CPU rule path says so
        assert result["rule"]["path"] == "cpu-build" and "CPU-only machine" in result["rule"]["note"]
