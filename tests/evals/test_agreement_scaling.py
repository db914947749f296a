"""The agreement report and the scaling model, on hand-made records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.benchmarks import agreement, scaling


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_eager_agreement_and_speedup_changes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    first = _write(
        tmp_path / "a.jsonl",
        [
            {"problem": "p1", "verifier_eager_ms": 1.0, "baseline_eager_ms": 1.02, "speedup_vs_eager": 2.0},
            {"problem": "p2", "verifier_eager_ms": 2.0, "baseline_eager_ms": 2.0, "speedup_vs_eager": 1.0},
            {"problem": "p3", "status": "failed"},
        ],
    )
    second = _write(
        tmp_path / "b.jsonl",
        [{"problem": "p1", "speedup_vs_eager": 2.1}, {"problem": "p2", "speedup_vs_eager": 1.0}],
    )
    assert agreement.eager_disagreement(agreement.read_records(first))[0] == ("p1", pytest.approx(0.02))
    assert agreement.main([str(first), str(second)]) == 0  # 2% eager, median 2.5% and worst 5% changes
    out = capsys.readouterr().out
    assert "worst 2.00%" in out and "median change 2.50%" in out and "all bounds hold" in out
    far = _write(tmp_path / "c.jsonl", [{"problem": "p1", "speedup_vs_eager": 2.4}])
    assert agreement.main([str(first), str(far)]) == 1
    assert agreement.main([str(tmp_path / "missing.jsonl")]) == 2


def test_wall_time_bounds() -> None:
    loads = [scaling.Load(quiet=1.0, device=2.0, cpu=9.0)] * 10  # 12 s a problem, 120 s in all
    assert scaling.wall_time(loads, 1, 1, 12) == (30.0, "GPUs")  # 10 x (1 + 2) on one GPU
    assert scaling.wall_time(loads, 1, 4, 1) == (120.0, "job slots")
    assert scaling.wall_time(loads, 1, 8, 96) == (12.0, "longest problem")
    quiet_bound = [scaling.Load(quiet=3.0, device=0.0, cpu=0.0)] * 10
    assert scaling.wall_time(quiet_bound, 1, 8, 96) == (30.0, "quiet window")  # one node: timing is serial
    assert scaling.wall_time(quiet_bound, 8, 1, 12) == (3.75, "quiet window")
    assert len(scaling.scale(loads, 25)) == 25


def test_loads_from_records_with_and_without_a_breakdown(tmp_path: Path) -> None:
    steps = {"trace_s": 1.0, "plan_s": 1.0, "build_s": 3.0, "correctness_s": 2.0, "timing_s": 4.0,
             "profile_s": 1.0, "baselines_s": 6.0, "wait_s": 30.0, "other_s": 2.0}  # fmt: skip
    load = scaling.problem_load({"breakdown": steps}, baselines_cached=False)
    assert load == scaling.Load(quiet=7.0, device=3.0, cpu=10.0)  # waits are not work
    cached = scaling.problem_load({"breakdown": steps}, baselines_cached=True)
    assert cached is not None and cached.total == 14.0
    assert scaling.problem_load({"seconds": 20.0, "build_s": 5.0}, baselines_cached=True) is None
    old = _write(tmp_path / "old.jsonl", [{"problem": "p", "seconds": 20.0}])
    assert scaling.main([str(old)]) == 1
    mixed = _write(
        tmp_path / "new.jsonl", [{"problem": "p", "seconds": 20.0}, {"problem": "q", "breakdown": steps}]
    )
    assert scaling.main([str(mixed), "--gpus", "1,2"]) == 0
