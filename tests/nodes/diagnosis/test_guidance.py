"""nodes.diagnosis guidance: retrieval queries, Feedback citing the notes retrieved (the real guidance
store: Chroma, offline embedder, in the session's temporary store directory), merging a policy's advice."""

from __future__ import annotations

from typing import Any

from support.profiles import (
    bad_kernels,
    host_sync,
    transpose_only,
)

from graph.artifacts import Feedback
from nodes import diagnosis


def test_retrieval_queries_name_symptoms_and_metrics_never_kernels_or_code() -> None:
    for finding in bad_kernels().findings + host_sync().findings:
        query = finding.query()
        assert "Symptoms:" in query and "Metrics:" in query
        assert finding.kernel == "" or finding.kernel not in query
        assert not any(token in query for token in ("__global__", "void ", "{", ";\n"))


def test_feedback_cites_the_notes_retrieved_for_the_top_findings() -> None:
    d = transpose_only()
    guidance = diagnosis.retrieve_guidance(d)
    assert not guidance.error
    top_notes = guidance.cited[0]
    assert {"coalesced-global-loads", "uncoalesced-stores", "strided-and-aos-access"} & set(top_notes)
    feedback = diagnosis.feedback_from(d, guidance)
    assert feedback.kind == "optimize" and "\n" not in feedback.summary
    assert feedback.summary.startswith("uncoalesced global stores in transpose_naive")
    assert feedback.suggestions[0].endswith(f"[notes: {', '.join(top_notes)}]")
    assert feedback.sources == guidance.sources and set(top_notes) <= set(feedback.sources)
    assert "Speed of light: SOL" in feedback.evidence and "transpose_naive: 100%" in feedback.evidence
    assert len(guidance.notes) == len(guidance.sources) and guidance.notes[0].startswith(
        f"[{feedback.sources[0]}]"
    )


def test_host_sync_diagnosis_retrieves_the_synchronisation_notes() -> None:
    guidance = diagnosis.retrieve_guidance(host_sync())
    assert {"hidden-host-synchronisation", "avoid-host-device-round-trips"} & set(guidance.cited[0])


def test_a_broken_guidance_store_leaves_the_advice_uncited_but_whole() -> None:
    def broken(query: str, k: int) -> list[Any]:
        raise RuntimeError("chromadb is not installed")

    d = host_sync()
    guidance = diagnosis.retrieve_guidance(d, broken)
    feedback = diagnosis.feedback_from(d, guidance)
    assert feedback.sources == [] and "guidance store unavailable" in feedback.evidence
    assert feedback.suggestions and "[notes:" not in feedback.suggestions[0]


def test_merging_keeps_the_author_of_the_diagnosis_reading_in_front() -> None:
    diagnosed = Feedback(
        kind="optimize", summary="diag", evidence="E1", suggestions=["a [notes: n1]"], sources=["n1"]
    )
    advice = Feedback(
        kind="optimize", summary="llm", evidence="E2", suggestions=["b", "a [notes: n1]"], sources=["n2"]
    )
    llm_first = diagnosis.merge_advice(diagnosed, advice, policy_read_diagnosis=True)
    assert llm_first.summary == "llm" and llm_first.suggestions == ["b", "a [notes: n1]"]
    diag_first = diagnosis.merge_advice(diagnosed, advice, policy_read_diagnosis=False)
    assert diag_first.summary == "diag" and diag_first.suggestions == ["a [notes: n1]", "b"]
    assert diag_first.sources == ["n1", "n2"] and diag_first.evidence == "E1\nE2"
    assert diagnosis.merge_advice(diagnosed, None, policy_read_diagnosis=False) is diagnosed
