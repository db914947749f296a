"""The run report shows both profiles: the planner's view of the reference and the reported program's."""

from __future__ import annotations

from graph.artifacts import Best, BuildResult, Candidate, TestResult
from nodes.support.report import build_report, render_markdown


def _profile(source: str, summary: str) -> dict:
    return {
        "source": source,
        "device_ms": 1.0,
        "kernel_count": 4,
        "own_kernel_share": 0.0,
        "summary": summary,
        "top": [],
    }


def test_the_report_carries_the_reference_profile_next_to_the_candidates() -> None:
    state = {
        "task": {"name": "scale_relu"},
        "plan": {"groups": []},
        "profile": _profile("nsys", "nsys: 1.17 ms per forward, 1 kernels"),
        "reference_profile": _profile("nsys", "nsys: 4.77 ms per forward, 4 kernels"),
        "history": [],
    }
    report = build_report(state, "verified", "ok", "offline")
    assert report["reference_profile"]["summary"].startswith("nsys: 4.77 ms")
    assert "top" not in report["reference_profile"]
    text = render_markdown(report)
    assert "- reference: nsys: 4.77 ms per forward, 4 kernels" in text
    assert "- candidate: nsys: 1.17 ms per forward, 1 kernels" in text


def test_without_profiles_the_report_has_no_profile_section() -> None:
    report = build_report(
        {"task": {"name": "p"}, "plan": {}, "history": []}, "failed", "no program", "offline"
    )
    assert report["profile"] is None and report["reference_profile"] is None
    assert "## Profile" not in render_markdown(report)


def _best(candidate: int, kernel: str) -> Best:
    trace = {"device_ms": 0.32, "kernel_count": 1, "own_kernel_share": 1.0}
    trace["top"] = [{"name": kernel, "calls": 1, "total_ms": 0.32, "share": 1.0}]
    test = TestResult(status="passed", candidate_ms=0.4, eager_ms=0.44, profile=trace)
    program = Candidate(id=candidate, source="x = 1\n", mode="write", policy="offline")
    return Best(candidate=program, test=test, build=BuildResult(ok=True))


def test_a_later_slower_candidates_profile_is_not_reported_as_the_best_programs() -> None:
    # candidate 2 (a CUDA graph whose input copies made it slower) was profiled last; 1 stays the best
    state = {
        "task": {"name": "norm"},
        "plan": {"groups": []},
        "history": [],
        "candidate": {"id": 2},
        "profile": _profile("torch_profiler", "0.675 ms; top kernel Memcpy DtoD takes 52%"),
        "best": _best(1, "stitch_gn_onepass_kernel").dump(),
    }
    report = build_report(state, "verified", "ok", "offline")  # type: ignore[arg-type]
    assert report["candidate_id"] == 1
    assert report["profile"]["device_ms"] == 0.32
    assert "stitch_gn_onepass_kernel" in report["profile"]["summary"]
    state["candidate"] = {"id": 1}  # the best was the last profiled: its (richer) profile is kept
    assert "Memcpy" in build_report(state, "verified", "ok", "offline")["profile"]["summary"]  # type: ignore[arg-type]
