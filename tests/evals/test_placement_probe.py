"""The placement probe (evals.device.placement_probe) on the CPU: real child processes, real timings."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES

from evals.device import placement_probe


def test_the_spreads_of_a_row_come_from_the_processes_measurements() -> None:
    runs = [
        {"off": [1.0, 1.1], "on": [1.0, 1.0], "on_rounds": [1.0, 1.2], "churn": [1.155], "checked": [1.155]},
        {"off": [1.2, 1.2], "on": [1.05, 1.05], "on_rounds": [1.0, 1.0], "churn": [1.26], "checked": [1.2]},
    ]
    row = placement_probe.summarise("p", runs)
    assert row["off across %"] == pytest.approx(100 * (1.2 / 1.05 - 1))
    assert row["on across %"] == pytest.approx(5.0)
    assert row["off within %"] == pytest.approx(5.0)  # (10% + 0%) / 2
    assert row["on rounds %"] == pytest.approx(10.0)
    assert row["churn / off"] == pytest.approx((1.155 / 1.05 + 1.26 / 1.2) / 2)  # 1.10 and 1.05
    assert row["checked / off"] == pytest.approx((1.1 + 1.0) / 2)
    assert placement_probe.spread([2.0]) == 0.0


def test_pinned_and_issue_columns_come_from_their_settings() -> None:
    runs = [
        {"off": [1.0], "on": [1.0], "on_rounds": [1.0], "pinned": [1.0], "off_issue_ms": [0.020, 0.030]},
        {"off": [1.0], "on": [1.0], "on_rounds": [1.0], "pinned": [1.02], "off_issue_ms": [0.045]},
    ]
    row = placement_probe.summarise("p", runs)
    assert row["pinned across %"] == pytest.approx(2.0)
    assert row["pinned / off"] == pytest.approx(1.01)
    assert row["off issue us"] == pytest.approx(35.0)  # the processes' means 25 and 45 us
    assert row["off issue across us"] == pytest.approx(20.0)


def test_the_probe_times_a_problem_in_fresh_processes(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "problems" / "scale_relu.py"
    assert placement_probe.main(["--processes", "2", "--repeats", "1", str(path)]) == 0
    out = capsys.readouterr().out
    assert '"processes": 2' in out and "| scale_relu |" in out
    for name in placement_probe.DEFAULT_PROBLEMS:  # the default list names suite files
        assert (placement_probe.SUITE / name).is_file(), name


def test_a_missing_problem_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        placement_probe.main([str(tmp_path / "none.py")])


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="on a GPU the neighbour starts")
def test_a_churn_neighbour_that_cannot_start_stops_the_probe_loudly() -> None:
    with pytest.raises(RuntimeError, match="did not start"), placement_probe.churning(True):
        pass
