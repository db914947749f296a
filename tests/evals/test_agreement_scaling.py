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
            {
                "problem": "p1",
                "verifier_eager_ms": 1.0,
                "baseline_eager_ms": 1.02,
                "verifier_eager_median_ms": 0.99,
                "baseline_eager_median_ms": 1.0395,
                "speedup_vs_eager": 2.0,
            },
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
    # the medians' gap is printed (5%, over 3%) but the bound is the headline means'
    assert agreement.eager_disagreement(agreement.read_records(first), "median") == [
        ("p1", pytest.approx(0.05))
    ]
    assert "by the medians (not a bound): 1 problems, worst 5.00%" in out and "over 3%: 1" in out
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


def test_the_wall_of_a_sliced_eval_leaves_out_the_gaps_between_slices(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    steps = {"timing_s": 1.0, "correctness_s": 1.0, "build_s": 8.0}
    # two slices an hour apart: problems run 0-100 and 50-120 s, then 3600-3700 s
    records = [
        {"problem": "p1", "breakdown": steps, "started_at": 0.0, "finished_at": 100.0},
        {"problem": "p2", "breakdown": steps, "started_at": 50.0, "finished_at": 120.0},
        {"problem": "p3", "breakdown": steps, "started_at": 3600.0, "finished_at": 3700.0},
    ]
    assert scaling.union_seconds([(0.0, 100.0), (50.0, 120.0), (3600.0, 3700.0)]) == 220.0
    results = _write(tmp_path / "r.jsonl", records)
    slices = tmp_path / "r.slices.jsonl"
    slices.write_text(
        json.dumps({"slice": 1, "start": -10, "end": 150, "exit": 124})
        + "\n"
        + json.dumps({"slice": 2, "start": 3590, "end": 3710, "exit": 0})
        + "\n"
    )
    assert scaling.slice_seconds(slices) == (280.0, 2)
    assert scaling.main([str(results), "--slices", str(slices), "--gpus", "1"]) == 0
    out = capsys.readouterr().out
    assert "suite wall 4.7 min (93.3 s/problem): the sum of 2 slices' spans" in out
    assert (
        "runs in flight 3.7 min" in out
        and "first start to last finish 61.7 min (for a sliced eval: gaps included)" in out
    )
    assert "12 problems at once per GPU (Ray's default runs 1: --ray-gpus-per-task 1)" in out


def test_ray_packing_sets_the_problems_per_gpu(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    steps = {"timing_s": 1.0, "correctness_s": 1.0, "build_s": 10.0}
    results = _write(tmp_path / "r.jsonl", [{"problem": f"p{i}", "breakdown": steps} for i in range(24)])
    for per_task, jobs in (("1", 1), ("0.25", 4), ("0.08", 12)):
        assert scaling.main([str(results), "--gpus", "1", "--ray-gpus-per-task", per_task]) == 0
        assert f"{jobs} problem(s) per GPU" in capsys.readouterr().out
    # one problem per GPU: the job slots bind (24 x 12 s on one GPU), not the GPU's 24 x 2 s
    assert scaling.wall_time(scaling.scale([scaling.Load(1.0, 1.0, 10.0)], 24), 1, 1, 1) == (
        288.0,
        "job slots",
    )
    assert scaling.main([str(results), "--ray-gpus-per-task", "0"]) == 2
