"""The speed verdict: a speedup is called one only outside the noise of its own rounds, and the
reported program is the one with the best side-by-side ratio."""

from __future__ import annotations

import pytest

from graph.artifacts import Best, BuildResult, Candidate, TestResult
from nodes.support.report import build_report, render_markdown
from nodes.support.speed import NOISE_FLOOR, beats, noise_band, speed_verdict
from nodes.support.worker_client import to_test_result


@pytest.mark.parametrize(
    ("speedup", "cv", "rounds", "kind"),
    [
        (1.50, 0.01, 10, "faster"),
        (1.015, 0.001, 10, "within_noise"),  # inside the 2% floor however quiet the rounds
        (1.06, 0.20, 5, "within_noise"),  # 2 x 0.20 / sqrt(5) = 18% band
        (1.06, 0.01, 5, "faster"),
        (0.90, 0.01, 8, "slower"),
        (None, None, 0, "untimed"),
    ],
)
def test_the_verdict_weighs_the_speedup_against_its_rounds(
    speedup: float | None, cv: float | None, rounds: int, kind: str
) -> None:
    assert speed_verdict(speedup, cv, rounds).kind == kind


def test_the_band_never_falls_under_the_floor_and_widens_with_scatter() -> None:
    assert noise_band(None, 0) == NOISE_FLOOR == noise_band(0.0, 10)
    assert noise_band(0.10, 4) == pytest.approx(0.10)
    assert noise_band(0.10, 16) < noise_band(0.10, 4)


def _test(candidate_ms: float, eager_ms: float) -> TestResult:
    return TestResult(status="passed", candidate_ms=candidate_ms, eager_ms=eager_ms,
                      speedup_vs_eager=eager_ms / candidate_ms)  # fmt: skip


def test_the_best_program_is_chosen_by_its_side_by_side_ratio_not_its_raw_time() -> None:
    # The second candidate's window was slower for everyone: its raw time is worse, its ratio better.
    first, second = _test(1.00, 1.10), _test(1.05, 1.40)
    assert beats(second, first) and not beats(first, second)
    assert beats(first, None)
    untimed = TestResult(status="passed", candidate_ms=0.9)
    assert beats(untimed, TestResult(status="passed", candidate_ms=1.0))


def test_a_fallback_within_the_noise_never_displaces_a_covered_program() -> None:
    # The fix branch demoted the group to PyTorch: 1% faster by the clock is no reason to report it.
    covered = _test(1.00, 0.99).model_copy(update={"operator_coverage": 1.0})
    fallback = _test(0.98, 0.98).model_copy(update={"verdict": "suspicious", "operator_coverage": 0.0})
    assert not beats(fallback, covered) and beats(covered, fallback)
    # faster beyond the noise, it wins; and equal coverage falls back to the plain ratio
    assert beats(_test(0.80, 0.99).model_copy(update={"verdict": "suspicious"}), covered)
    assert beats(_test(0.98, 0.99), _test(1.00, 0.99))
    # a coverage gap within the profile's noise is no gap
    nearly = _test(0.99, 0.99).model_copy(update={"operator_coverage": 0.97})
    assert beats(nearly, covered)


def test_the_round_statistics_reach_the_report_as_a_plain_sentence() -> None:
    response = {
        "status": "passed",
        "timing": {
            "candidate_ms": 1.0,
            "eager_ms": 1.01,
            "ratios": {"eager": {"mean": 1.01, "median": 1.01, "cv": 0.03, "rounds": 6}},
            "candidate": {"mean_ms": 1.0, "issue_mean_ms": 0.0475},
            "eager": {"mean_ms": 1.01, "median_ms": 1.005},
        },
    }
    test = to_test_result(response, "class ModelNew: pass\n")
    assert test.speedup_cv == 0.03 and test.speedup_rounds == 6
    assert test.candidate_issue_ms == 0.0475 and test.eager_issue_ms is None  # the host-bound rule's input
    assert test.eager_median_ms == 1.005  # the eval's eager agreement by medians reads it from the report
    best = Best(
        candidate=Candidate(id=1, source="x = 1\n", mode="write", policy="offline"),
        test=test,
        build=BuildResult(ok=True),
    )
    report = build_report({"task": {"name": "p"}, "plan": {}, "history": [], "best": best.dump()},
                          "verified", "ok", "offline")  # fmt: skip
    assert report["speed"]["kind"] == "within_noise" and report["eager_median_ms"] == 1.005
    assert "- speed: no faster than eager: 1.01x is within the noise" in render_markdown(report)
