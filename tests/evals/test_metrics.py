"""Suite metrics, checked against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

from evals.metrics import FAST_P, geomean, level_metrics, mean, summarize, summary_table

# level1 has 5 problems, 4 with records (one missing); level2 has 2 problems, 1 record.
RECORDS = [
    {"problem": "level1/1_a", "level": "level1", "status": "verified", "built": True,
     "speedup_vs_eager": 2.0, "speedup_vs_compile": 1.0, "verdict": "clean"},
    {"problem": "level1/2_b", "level": "level1", "status": "verified", "built": True,
     "speedup_vs_eager": 0.5, "speedup_vs_compile": 0.25, "verdict": "suspicious"},
    {"problem": "level1/3_c", "level": "level1", "status": "verified", "built": True,
     "speedup_vs_eager": 10.0, "speedup_vs_compile": 5.0, "verdict": "hacked"},
    {"problem": "level1/4_d", "level": "level1", "status": "failed", "built": False},
    {"problem": "level2/1_e", "level": "level2", "status": "verified", "built": True, "speedup_vs_eager": 4.0},
]  # fmt: skip
TOTALS = {"level1": 5, "level2": 2}


def test_means() -> None:
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([None, 0.0, -1.0]) is None
    assert mean([1.0, None, 2.0]) == pytest.approx(1.5)
    assert mean([]) is None


def test_level_rates_count_missing_and_hacked_as_failed() -> None:
    m = summarize(RECORDS, TOTALS)["levels"]["level1"]
    assert (m["problems"], m["attempted"], m["compiled"], m["correct"], m["hacked"]) == (5, 4, 3, 2, 1)
    assert m["compile_rate"] == pytest.approx(3 / 5)
    assert m["correctness_rate"] == pytest.approx(2 / 5)  # the hacked 10x program is not correct
    assert m["hacking_rate"] == pytest.approx(1 / 5)


def test_speedups_and_fast_p_against_eager_and_best_compile() -> None:
    m = summarize(RECORDS, TOTALS)["levels"]["level1"]
    eager, comp = m["vs_eager"], m["vs_compile"]
    assert eager["timed"] == 2
    assert eager["geomean_speedup"] == pytest.approx(1.0)  # sqrt(2.0 * 0.5)
    assert eager["mean_speedup"] == pytest.approx(1.25)
    assert eager["fast_p"] == pytest.approx(
        {"0": 0.4, "0.5": 0.2, "0.8": 0.2, "1": 0.2, "1.5": 0.2, "2": 0.0}
    )
    assert comp["geomean_speedup"] == pytest.approx(0.5)  # sqrt(1.0 * 0.25)
    assert comp["mean_speedup"] == pytest.approx(0.625)
    # fast_p is strictly greater than p: a 1.0x program is not fast_1.
    assert comp["fast_p"] == pytest.approx({"0": 0.4, "0.5": 0.2, "0.8": 0.2, "1": 0.0, "1.5": 0.0, "2": 0.0})
    assert list(eager["fast_p"]) == [f"{p:g}" for p in FAST_P]


def test_a_comparison_nobody_measured_is_none_not_zero() -> None:
    level2 = summarize(RECORDS, TOTALS)["levels"]["level2"]
    assert level2["correctness_rate"] == pytest.approx(0.5)
    assert level2["vs_eager"]["fast_p"]["1"] == pytest.approx(0.5)
    assert level2["vs_compile"]["timed"] == 0 and level2["vs_compile"]["geomean_speedup"] is None
    assert all(v is None for v in level2["vs_compile"]["fast_p"].values())


def test_overall_is_over_every_problem_of_every_level() -> None:
    overall = summarize(RECORDS, TOTALS)["all"]
    assert overall["problems"] == 7 and overall["correct"] == 3
    assert overall["correctness_rate"] == pytest.approx(3 / 7)
    assert overall["vs_eager"]["geomean_speedup"] == pytest.approx(
        math.exp((math.log(2) + math.log(0.5) + math.log(4)) / 3)
    )
    assert overall["vs_eager"]["fast_p"]["2"] == pytest.approx(1 / 7)  # only the 4x program
    assert overall["vs_compile"]["fast_p"]["0"] == pytest.approx(2 / 7)  # level2 had no compile baseline


def test_more_records_than_the_stated_total_never_give_rates_above_one() -> None:
    m = level_metrics(RECORDS[:3], total=1)
    assert m["problems"] == 3 and m["correctness_rate"] == pytest.approx(2 / 3)


def test_bad_speedups_are_ignored() -> None:
    rows = [
        {"level": "l", "status": "verified", "built": True, "speedup_vs_eager": float("nan")},
        {"level": "l", "status": "verified", "built": True, "speedup_vs_eager": 0.0},
        {"level": "l", "status": "verified", "built": True, "speedup_vs_eager": 3.0},
    ]
    m = level_metrics(rows, 3)
    assert m["vs_eager"]["timed"] == 1 and m["vs_eager"]["geomean_speedup"] == pytest.approx(3.0)
    assert m["vs_eager"]["fast_p"]["0"] == pytest.approx(1 / 3)  # correct but untimed is not fast_0


def test_summary_table_rows() -> None:
    text = summary_table(summarize(RECORDS, TOTALS))
    lines = text.splitlines()
    assert lines[0].startswith(
        "| level | problems | compiled | correct | hacked | vs | geomean | mean | fast_0 |"
    )
    assert (
        "| level1 | 5 | 60% | 40% | 20% | eager | 1.00x | 1.25x | 40% | 20% | 20% | 20% | 20% | 0% |" in lines
    )
    assert "| | | | | | compile | 0.50x | 0.62x | 40% | 20% | 20% | 0% | 0% | 0% |" in lines
    assert "| | | | | | compile | - | - | - | - | - | - | - | - |" in lines  # level2
    assert any(line.startswith("| all | 7 |") for line in lines)
    assert "upper bound" not in text  # every compile mode was measured


def test_a_failed_compile_mode_is_counted_and_named_under_the_table() -> None:
    partial = [
        {
            **RECORDS[0],
            "baseline_errors": {"max-autotune-no-cudagraphs": "OutOfMemoryError: CUDA out of memory"},
        },
        {**RECORDS[1], "baseline_errors": {"eager": "OutOfMemoryError"}},  # eager is not a compile mode
        {**RECORDS[4], "baseline_errors": {"default": "error"}},  # no speedup over compile: nothing bounded
    ]
    summary = summarize(partial, TOTALS)
    assert summary["all"]["compile_partial"] == 1 and summary["levels"]["level1"]["compile_partial"] == 1
    assert "1 problem(s) had a torch.compile mode fail" in summary_table(summary)
