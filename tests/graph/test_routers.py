"""Routers are plain functions: every branch and every budget limit, decided from state alone."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.routers import (
    budget_exhausted,
    route_after_coder,
    route_after_planner,
    route_after_profile,
    route_after_verifier,
)


def rt(**overrides) -> Runtime[Context]:
    return Runtime(context=Context(**overrides))


def test_planner_routes_failed_problem_to_finalize():
    assert route_after_planner({"status": "failed"}) == "finalize"
    assert route_after_planner({"status": "running"}) == "finalize"  # no plan
    assert route_after_planner({"status": "running", "plan": {"task": "x"}}) == "coder"


def test_coder_routes_by_outcome():
    assert route_after_coder({"coder_outcome": "candidate"}, rt()) == "verifier"
    assert route_after_coder({"coder_outcome": "policy_error", "iteration": 1}, rt()) == "fix"
    assert route_after_coder({"coder_outcome": "unchanged"}, rt()) == "finalize"
    spent = {"coder_outcome": "policy_error", "iteration": 6}
    assert route_after_coder(spent, rt(max_iterations=6)) == "finalize"


def test_verifier_routes_pass_fail_and_no_gpu():
    state = {"iteration": 1, "fix_streak": 0}
    assert route_after_verifier(state | {"test": {"status": "passed"}}, rt()) == "profile"
    for status in ("build_error", "runtime_error", "timeout", "wrong_output", "crashed"):
        assert route_after_verifier(state | {"test": {"status": status}}, rt()) == "fix", status
    assert route_after_verifier(state | {"test": {"status": "no_gpu"}}, rt()) == "finalize"


def test_fix_branch_is_bounded_by_streak_iterations_and_time():
    failing = {"test": {"status": "wrong_output"}}
    assert (
        route_after_verifier(failing | {"iteration": 2, "fix_streak": 3}, rt(max_fix_attempts=3))
        == "finalize"
    )
    assert (
        route_after_verifier(failing | {"iteration": 4, "fix_streak": 1}, rt(max_iterations=4)) == "finalize"
    )
    late = failing | {"iteration": 1, "fix_streak": 1, "spent_s": 100.0}
    assert route_after_verifier(late, rt(wall_time_s=99.0)) == "finalize"
    assert "wall-time" in budget_exhausted(late, Context(wall_time_s=99.0))


def test_optimise_only_while_the_last_step_gained():
    base = {"iteration": 2, "optimize_rounds": 0}
    assert route_after_profile(base | {"last_gain": None}, rt()) == "optimize"  # first verified program
    assert route_after_profile(base | {"last_gain": 0.10}, rt(min_gain=0.02)) == "optimize"
    assert route_after_profile(base | {"last_gain": 0.01}, rt(min_gain=0.02)) == "finalize"
    assert route_after_profile(base | {"last_gain": -0.2}, rt()) == "finalize"
    assert route_after_profile(base | {"optimize_rounds": 2}, rt(max_optimize_rounds=2)) == "finalize"
    assert route_after_profile({"iteration": 6}, rt(max_iterations=6)) == "finalize"
