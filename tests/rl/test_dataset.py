"""Coder turns recorded by real graph runs become the two skill datasets.

The graph runs with the scripted policy (the seam) and everything else real: the worker process,
the g++ build of the C++ candidate, correctness and timing on the CPU. Its OUT/turns.jsonl is then
turned into skill1.jsonl / skill2.jsonl and loaded with `datasets`.
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
from support.scripted_policy import (
    CORRECT_CPP,
    OPTIMIZED,
    WRONG,
    ScriptedPolicy,
    cpu_context,
    install,
    uninstall,
)

from graph.artifacts import Candidate, Feedback, Plan, Task
from graph.build import builder
from nodes.llm import prompting
from nodes.support.turn_log import TURNS_FILE, chat_messages
from rl.dataset import DatasetError, read_rows, write_dataset

REPO = Path(__file__).resolve().parents[2]
PROBLEM = str(FIXTURES / "problems" / "scale_relu.py")
STARTER = REPO / "rl" / "data" / "starter"


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One graph run: a wrong program, then a correct C++ one, then an optimisation."""
    out = tmp_path_factory.mktemp("run")
    policy = ScriptedPolicy([WRONG, CORRECT_CPP, OPTIMIZED])
    install(policy)
    try:
        app = builder.compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "rec1"}, "recursion_limit": 60}
        app.invoke({"problem_path": PROBLEM}, config, context=cpu_context(out_dir=str(out)))
    finally:
        uninstall(policy)
    return out


@pytest.mark.slow
def test_every_turn_is_recorded_with_its_outcome(recorded_run: Path) -> None:
    records = [json.loads(line) for line in (recorded_run / TURNS_FILE).read_text().splitlines()]
    kinds = [r["type"] for r in records]
    assert kinds[0] == "run" and kinds[-1] == "final" and kinds.count("turn") == 3
    turns = [r for r in records if r["type"] == "turn"]
    assert [(t["skill"], t["mode"]) for t in turns] == [
        ("write", "write"),
        ("revise", "fix"),
        ("revise", "optimize"),
    ]
    outcomes = {r["candidate"]: r["status"] for r in records if r["type"] == "outcome"}
    assert outcomes == {1: "wrong_output", 2: "passed", 3: "passed"}
    assert all(r["run"] == "rec1" for r in records)


@pytest.mark.slow
def test_prompts_are_the_llm_coders_own_messages(recorded_run: Path) -> None:
    records = [json.loads(line) for line in (recorded_run / TURNS_FILE).read_text().splitlines()]
    head = next(r for r in records if r["type"] == "run")
    fix = next(r for r in records if r["type"] == "turn" and r["mode"] == "fix")
    task = Task(name=head["problem"]["name"], path=head["problem"]["path"], source=head["problem"]["source"])
    previous = Candidate(id=fix["previous"]["id"], source=fix["previous"]["source"], mode="write", policy="x")
    expected = prompting.coder_revise_messages(
        cpu_context(),
        task,
        Plan.model_validate(head["plan"]),
        previous,
        Feedback.model_validate(fix["feedback"]),
        "fix",
    )
    assert fix["messages"] == chat_messages(expected)
    assert fix["feedback"]["kind"] == "wrong_output" and fix["previous"]["source"] == WRONG


@pytest.mark.slow
def test_dataset_rows_load_with_datasets_and_carry_the_reference(recorded_run: Path, tmp_path: Path) -> None:
    # a resumed run appends the same lines again (the last line per turn counts), and a second folder
    # holding the same turns adds nothing: the builder keeps one row per (prompt, answer)
    turns = (recorded_run / TURNS_FILE).read_text()
    copy = tmp_path / "again" / TURNS_FILE
    copy.parent.mkdir()
    copy.write_text(turns + turns + '{"type": "turn", "run": "rec1", cut by a crash\n')
    stats = write_dataset([recorded_run, copy.parent], tmp_path / "ds")
    assert (
        stats.rows == {"write": 1, "revise": 2}
        and stats.duplicates == 3
        and stats.turns == 6
        and stats.unreadable_lines == 1
    )

    load_dataset = pytest.importorskip("datasets").load_dataset
    skill1 = load_dataset("json", data_files=str(tmp_path / "ds" / "skill1.jsonl"), split="train")
    skill2 = load_dataset("json", data_files=str(tmp_path / "ds" / "skill2.jsonl"), split="train")
    assert skill1[0]["outcome"]["status"] == "wrong_output" and skill1[0]["prompt"][0]["role"] == "system"
    assert sorted(skill2["mode"]) == ["fix", "optimize"]
    fix = next(row for row in skill2 if row["mode"] == "fix")
    assert fix["previous_program"] == WRONG and fix["previous_outcome"]["status"] == "wrong_output"
    assert json.loads(fix["feedback"])["kind"] == "wrong_output"
    # the fastest verified program of the problem is every row's reference
    assert skill1[0]["reference_program"] in (CORRECT_CPP, OPTIMIZED)
    assert all(row["reference_program"] == skill1[0]["reference_program"] for row in skill2)


@pytest.mark.slow
def test_dataset_command(recorded_run: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "graph.cli", "rl", "dataset", str(recorded_run), "--out", str(tmp_path / "d")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 write rows, 2 revise rows" in done.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "graph.cli", "rl", "dataset", str(tmp_path / "nothing"), "--out", str(tmp_path / "e")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_the_starter_dataset_loads_and_says_where_it_came_from() -> None:
    load_dataset = pytest.importorskip("datasets").load_dataset

    manifest = json.loads((STARTER / "manifest.json").read_text())
    provenance = (STARTER / "PROVENANCE.md").read_text()
    skill1 = load_dataset("json", data_files=str(STARTER / "skill1.jsonl.xz"), split="train")
    skill2 = load_dataset("json", data_files=str(STARTER / "skill2.jsonl.xz"), split="train")
    assert len(skill1) == manifest["rows"]["skill1.jsonl.xz"] >= 20
    assert len(skill2) == manifest["rows"]["skill2.jsonl.xz"] >= 20
    assert len(set(skill1["id"])) == len(skill1) and len(set(skill2["id"])) == len(skill2)
    assert {"problem_name", "plan", "prompt", "answer", "outcome", "reference_program"} <= set(
        skill1.column_names
    )
    assert all(row["provenance"]["policy"] == "offline" for row in skill1)
    assert "stitchcuda eval" in provenance and "stitchcuda rl dataset" in provenance
    assert all(row["skill"] == "write" for row in read_rows(STARTER / "skill1.jsonl.xz"))
    # skill 2 from GPU runs: the verifier's feedback on programs that ran, and verified references
    assert all(row["skill"] == "revise" and json.loads(row["feedback"])["kind"] for row in skill2)
    assert any("H100" in str(row["previous_outcome"].get("device")) for row in skill2)
    assert sum(row["reference_program"] is not None for row in skill2) >= 20
    # findings are JSON text: rows without any must not leave the column untyped for `datasets`
    findings = [json.loads(row["outcome"]["findings"]) for row in skill2]
    assert any(findings) and all(isinstance(f, list) for f in findings)


@pytest.mark.slow
def test_a_dataset_grows_from_an_earlier_one_and_compresses(recorded_run: Path, tmp_path: Path) -> None:
    first = tmp_path / "first"
    write_dataset([recorded_run], first)
    (extra,) = [dict(r) for r in read_rows(first / "skill1.jsonl")]
    name = extra["problem_name"]
    extra.update(id="other-problem", problem_name="other", problem_source="# another problem", program="P")
    extra["outcome"] = {**extra["outcome"], "status": "passed", "verdict": "clean", "speedup_vs_eager": 2.0}
    with (first / "skill1.jsonl").open("a") as handle:
        handle.write(json.dumps(extra) + "\n")

    stats = write_dataset([recorded_run], first, keep=[first], compress=True)  # in place
    assert stats.rows == {"write": 2, "revise": 2} and stats.duplicates == 3  # the run's rows were kept too
    assert not (first / "skill1.jsonl").exists() and (first / "skill1.jsonl.xz").is_file()
    rows = {r["problem_name"]: r for r in read_rows(first / "skill1.jsonl.xz")}
    assert rows["other"]["reference_program"] == "P"  # chosen again over the kept and the new rows
    assert rows[name]["reference_program"] in (CORRECT_CPP, OPTIMIZED)
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["kept"] == [str(first)] and manifest["rows"]["skill2.jsonl.xz"] == 2

    load_dataset = pytest.importorskip("datasets").load_dataset
    loaded = load_dataset("json", data_files=str(first / "skill1.jsonl.xz"), split="train")
    assert sorted(loaded["problem_name"]) == sorted(rows)
    with pytest.raises(DatasetError, match="no skill1.jsonl"):
        write_dataset([recorded_run], tmp_path / "x", keep=[tmp_path / "empty"])
