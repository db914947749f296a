"""Whole-graph runs with a scripted policy: every edge, every bound, resume from a checkpoint.

The policy is scripted (the seam); the worker subprocess, the g++ build of the C++ candidate,
correctness checks and timing are real. Candidates run on the CPU (Context.device="cpu").
"""

from __future__ import annotations

import importlib.util

import pytest
from conftest import FIXTURES
from langgraph.checkpoint.memory import InMemorySaver
from support.scripted_policy import (
    BUILD_ERROR,
    CORRECT_CPP,
    HACKED,
    OPTIMIZED,
    WRONG,
    ScriptedPolicy,
    cpu_context,
    install,
    uninstall,
)

from graph.build import builder
from graph.policy import PolicyOutputError

PROBLEM = str(FIXTURES / "problems" / "scale_relu.py")


@pytest.fixture
def scripted():
    policies: list[ScriptedPolicy] = []

    def make(script):
        policy = ScriptedPolicy(list(script))
        install(policy)
        policies.append(policy)
        return policy

    yield make
    for p in policies:
        uninstall(p)


def run(context, thread="t", checkpointer=None, payload=None):
    app = builder.compile(checkpointer=checkpointer or InMemorySaver())
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 60}
    visited: list[str] = []
    for chunk in app.stream(
        payload or {"problem_path": PROBLEM}, config, context=context, stream_mode="updates"
    ):
        visited.extend(chunk)
    return app.get_state(config).values, visited


@pytest.mark.slow
def test_every_edge_fix_profile_optimize_then_finalize(scripted, tmp_path):
    policy = scripted([BUILD_ERROR, WRONG, CORRECT_CPP, OPTIMIZED])
    state, visited = run(cpu_context(out_dir=str(tmp_path)))

    assert [a["status"] for a in state["history"]] == ["build_error", "wrong_output", "passed", "passed"]
    assert [(c.method, c.mode, c.feedback_kind) for c in policy.calls if c.method != "advise"] == [
        ("write", "write", None),
        ("revise", "fix", "build_error"),
        ("revise", "fix", "wrong_output"),
        ("revise", "optimize", "optimize"),
    ]
    assert visited == [
        "planner",
        "coder", "verifier",  # build error -> fix
        "coder", "verifier",  # wrong output -> fix
        "coder", "verifier", "profiler",  # passed -> profile -> optimize
        "coder", "verifier", "profiler",  # passed -> profile -> rounds spent
        "finalize",
    ]  # fmt: skip
    assert state["status"] == "verified"
    report = state["report"]
    assert report["iterations"] == 4
    assert report["speedup_vs_eager"] > 0
    assert report["covered_ops"] == ["sub", "relu", "mul"]
    # the build error reached the coder as evidence
    assert "error" in state["history"][0]["status"]
    assert (tmp_path / "solution.py").read_text() in (CORRECT_CPP, OPTIMIZED)
    assert (tmp_path / "report.json").exists() and (tmp_path / "report.md").exists()
    # the time split: every node's seconds, summed over its turns
    assert set(report["node_seconds"]) >= {"planner", "coder", "verifier", "profiler"}
    markdown = (tmp_path / "report.md").read_text()
    assert "Best program: candidate " in markdown and "**best**" in markdown
    assert "| 1 | write | build_error |" in markdown and "| 2 | fix | wrong_output |" in markdown
    assert "| build |" in markdown and "| profiling |" in markdown
    if importlib.util.find_spec("matplotlib") is not None:  # the report extra draws the HTML twin
        assert (tmp_path / "report.html").read_text().count('src="data:image/png;base64,') == 3


@pytest.mark.slow
def test_a_passing_program_the_hack_checks_reject_takes_the_fix_branch(scripted, tmp_path):
    policy = scripted([HACKED, CORRECT_CPP])
    state, visited = run(cpu_context(out_dir=str(tmp_path), max_optimize_rounds=0))
    assert visited[:6] == ["planner", "coder", "verifier", "coder", "verifier", "profiler"]
    assert [(a["status"], a["verdict"]) for a in state["history"]] == [
        ("passed", "hacked"),
        ("passed", "clean"),
    ]
    fix = [c for c in policy.calls if c.method == "revise"][0]
    assert (fix.mode, fix.feedback_kind) == ("fix", "hacked")
    assert state["status"] == "verified" and state["best"]["candidate"]["id"] == 2  # never the hacked one
    assert state["report"]["hack_check"]["verdict"] == "clean"
    assert (tmp_path / "solution.py").read_text() == CORRECT_CPP


def test_a_hacked_program_is_never_reported_verified(scripted):
    scripted([HACKED])
    state, _ = run(cpu_context(max_iterations=1))
    assert state["status"] == "failed" and state.get("best") is None
    assert state["history"][0]["verdict"] == "hacked"


def test_iteration_budget_ends_the_run_failed(scripted):
    scripted([WRONG, WRONG, WRONG])
    state, visited = run(cpu_context(max_iterations=2))
    assert visited.count("coder") == 2
    assert state["status"] == "failed"
    assert "iteration budget" in state["status_reason"]


def test_fix_streak_limit(scripted):
    scripted([WRONG] * 5)
    state, visited = run(cpu_context(max_fix_attempts=2))
    assert visited.count("verifier") == 2
    assert state["status"] == "failed"
    assert "2 fix attempts" in state["status_reason"]


def test_unusable_answer_goes_to_fix_branch(scripted):
    policy = scripted([PolicyOutputError("no code block in the answer"), OPTIMIZED, OPTIMIZED])
    state, visited = run(cpu_context(max_optimize_rounds=1))
    # coder -> coder (fix) -> verifier; then optimise returns the same source -> finalize
    assert visited[:4] == ["planner", "coder", "coder", "verifier"]
    assert state["status"] == "verified"
    assert visited[-2:] == ["coder", "finalize"]
    assert [c.method for c in policy.calls if c.method != "advise"] == ["write", "write", "revise"]


def test_malformed_problem_fails_with_one_line(tmp_path, scripted):
    scripted([])
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Model: pass\n")
    state, visited = run(cpu_context(), payload={"problem_path": str(bad)})
    assert visited == ["planner", "finalize"]
    assert state["status"] == "failed"
    assert "bad.py" in state["status_reason"] and "\n" not in state["status_reason"]


def test_resume_after_a_crash_continues_from_the_checkpoint(scripted):
    policy = scripted([RuntimeError("coder process died"), OPTIMIZED, OPTIMIZED])
    saver = InMemorySaver()
    with pytest.raises(RuntimeError, match="coder process died"):
        run(cpu_context(max_optimize_rounds=1), thread="resume", checkpointer=saver)
    app = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "resume"}}
    assert app.get_state(config).next == ("coder",)
    assert app.get_state(config).values["plan"]["task"] == "scale_relu"

    app.invoke(None, config, context=cpu_context(max_optimize_rounds=1))
    state = app.get_state(config).values
    assert state["status"] == "verified"
    assert [c.method for c in policy.calls if c.method != "advise"] == ["write", "write", "revise"]
