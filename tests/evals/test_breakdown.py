"""The per-problem time breakdown from a report's node seconds and worker phases, by hand."""

from __future__ import annotations

import pytest

from evals.breakdown import STEPS, breakdown, breakdown_table
from tools.protocol import FIRST_CALL_PHASE, EvalResponse, waited_seconds

REPORT = {
    "trace_s": 0.5,
    "node_seconds": {"planner": 2.0, "coder": 0.1, "verifier": 9.0, "profiler": 3.0},
    "attempts": [
        {
            "build_seconds": 4.0,
            "phases": {
                "checking correctness": 1.0,
                "waiting for the timing window": 0.5,
                "timing candidate and eager side by side": 2.0,
                "profiling for the hack checks": 0.25,
            },
        },
        {"build_seconds": 1.0, "phases": {"checking correctness": 0.5}},
    ],
}


def test_steps_come_from_the_report_and_the_baselines() -> None:
    steps = breakdown(REPORT, {"wall_s": 6.0}, total_s=30.0)
    assert steps == {
        "trace_s": 0.5,
        "plan_s": 1.5,
        "build_s": 5.0,
        "correctness_s": 1.5,
        "timing_s": 2.0,
        "profile_s": 3.25,
        "baselines_s": 6.0,
        "wait_s": 0.5,
        "other_s": pytest.approx(30.0 - 20.25),
    }


def test_the_harness_cross_check_counts_as_correctness_and_its_wait_as_wait() -> None:
    check = {
        "status": "passed",
        "seconds": 9.0,
        "phases": {"checking correctness": 6.0, "waiting for the device lock": 2.0},
    }
    steps = breakdown({**REPORT, "harness_check": check}, {"wall_s": 6.0}, total_s=30.0)
    assert steps["correctness_s"] == 7.5 and steps["wait_s"] == 2.5


def test_the_baselines_wait_for_a_gpu_slot_counts_as_wait_not_baselines() -> None:
    steps = breakdown(REPORT, {"wall_s": 6.0, "slot_wait_s": 2.5}, total_s=30.0)
    assert steps["baselines_s"] == 3.5 and steps["wait_s"] == 3.0
    assert sum(steps.values()) == pytest.approx(30.0)


def test_the_profiler_nodes_launch_search_waiting_counts_as_wait_not_profile() -> None:
    nodes = {**REPORT["node_seconds"], "profiler": 10.0, "profiler_wait": 7.5}  # type: ignore[dict-item]
    steps = breakdown({**REPORT, "node_seconds": nodes}, {"wall_s": 6.0}, total_s=40.0)
    assert steps["profile_s"] == 2.75 and steps["wait_s"] == 8.0
    assert sum(steps.values()) == pytest.approx(40.0)


def test_the_first_call_in_the_quiet_window_counts_as_timing() -> None:
    attempt = {"phases": {"waiting for the timing window": 1.0, FIRST_CALL_PHASE: 4.0}}
    steps = breakdown({"attempts": [attempt]}, None, total_s=10.0)
    assert steps["timing_s"] == 4.0 and steps["wait_s"] == 1.0


def test_a_worker_runs_waiting_is_its_waiting_phases() -> None:
    response: EvalResponse = {
        "status": "passed",
        "phases": {"waiting for the device lock": 2.0, "waiting for the timing window": 0.5, "timing x": 3.0},
    }
    assert waited_seconds(response) == 2.5 and waited_seconds({"status": "passed"}) == 0.0


def test_missing_parts_count_as_other() -> None:
    steps = breakdown(None, None, total_s=7.0)
    assert steps["other_s"] == 7.0 and sum(steps.values()) == 7.0 and set(steps) == set(STEPS)


def test_table_has_a_row_per_problem_and_shares() -> None:
    records = [
        {"problem": "level1/2_b", "seconds": 30.0, "breakdown": breakdown(REPORT, {"wall_s": 6.0}, 30.0)},
        {"problem": "level1/1_a", "seconds": 10.0, "breakdown": breakdown(None, None, 10.0)},
    ]
    lines = breakdown_table(records).splitlines()
    assert lines[2].startswith("| level1/1_a |") and lines[3].startswith("| level1/2_b |")
    assert lines[-1].startswith("| **all 2** |") and "| 40 |" in lines[-1]
    assert "6 (15%)" in lines[-1]  # baselines: 6 s of 40
