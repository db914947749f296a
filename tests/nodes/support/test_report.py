"""The run report shows both profiles: the planner's view of the reference and the last candidate's."""

from __future__ import annotations

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
