"""Guidance and Feedback: retrieve notes for the top findings, cite them, and merge a policy's advice.

Each of the top findings is turned into a retrieval query made of its name, symptoms and metric names
(never code) against the guidance store (rag_corpus.store.retrieve); the notes that come back are
cited by id on the suggestions they support and listed in Feedback.sources.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from graph.artifacts import Feedback
from nodes.diagnosis.findings import Diagnosis

TOP_FINDINGS_CITED = 3
NOTES_PER_FINDING = 2
MAX_SUGGESTIONS = 8
NOTE_CHARS = 1500

Retriever = Callable[[str, int], Sequence[Any]]  # (query, k) -> hits with .id, .title, .text


def default_retriever(query: str, k: int) -> Sequence[Any]:
    """The guidance store (imported on first use: chromadb is heavy and optional for the tools)."""
    from rag_corpus.store import retrieve

    return retrieve(query, k=k)


@dataclass
class Guidance:
    """What retrieval returned for the top findings: note ids per finding and the notes' text."""

    cited: dict[int, list[str]] = field(default_factory=dict)  # finding index -> note ids
    notes: list[str] = field(default_factory=list)  # "[id] title\ntext" for the verifier prompt
    sources: list[str] = field(default_factory=list)
    error: str = ""


def retrieve_guidance(
    diagnosis: Diagnosis, retriever: Retriever | None = None, k: int = NOTES_PER_FINDING
) -> Guidance:
    """Query the store once per top finding with its diagnosis text; failures leave the advice uncited."""
    retriever = retriever or default_retriever
    guidance = Guidance()
    seen: set[str] = set()
    for index, finding in enumerate(diagnosis.findings[:TOP_FINDINGS_CITED]):
        if not finding.symptoms:
            continue
        try:
            hits = list(retriever(finding.query(), k))
        except Exception as exc:  # a missing or broken store must not cost the diagnosis
            first = str(exc).splitlines()[0] if str(exc) else ""
            guidance.error = f"guidance store unavailable: {type(exc).__name__}: {first}"
            break
        ids = []
        for hit in hits:
            ids.append(hit.id)
            if hit.id not in seen:
                seen.add(hit.id)
                guidance.sources.append(hit.id)
                text = hit.text if len(hit.text) <= NOTE_CHARS else hit.text[: NOTE_CHARS - 3] + "..."
                guidance.notes.append(f"[{hit.id}] {hit.title}\n{text}")
        guidance.cited[index] = ids
    return guidance


def feedback_from(diagnosis: Diagnosis, guidance: Guidance) -> Feedback:
    """Feedback(kind='optimize'): the top bottleneck, its evidence, and suggestions ranked with citations."""
    suggestions: list[str] = []
    for index, finding in enumerate(diagnosis.findings):
        ids = guidance.cited.get(index, [])
        cite = f" [notes: {', '.join(ids)}]" if ids else ""
        for advice in finding.advice:
            if len(suggestions) >= MAX_SUGGESTIONS:
                break
            if advice not in (s.rsplit(" [notes:", 1)[0] for s in suggestions):
                suggestions.append(advice + cite)
    evidence = diagnosis.text()
    if guidance.error:
        evidence += f"\nNote: {guidance.error}"
    return Feedback(
        kind="optimize",
        summary=diagnosis.summary(),
        evidence=evidence,
        suggestions=suggestions,
        sources=list(guidance.sources),
    )


def merge_advice(diagnosed: Feedback, advice: Feedback | None, *, policy_read_diagnosis: bool) -> Feedback:
    """One Feedback for the coder from the diagnosis and the policy's advice.

    A policy that wrote its advice from the diagnosis's text (the LLM verifier) leads: its summary and
    suggestions first, the diagnosis's after; otherwise (the offline policy, whose tagged suggestions
    only map the findings to its options) the diagnosis leads. Evidence keeps both; sources are the
    union, diagnosis notes first.
    """
    if advice is None:
        return diagnosed
    first, second = (advice, diagnosed) if policy_read_diagnosis else (diagnosed, advice)
    suggestions = list(first.suggestions)
    suggestions += [s for s in second.suggestions if s not in suggestions]
    evidence = "\n".join(e for e in (diagnosed.evidence, advice.evidence) if e)
    sources = list(dict.fromkeys([*diagnosed.sources, *advice.sources]))
    return Feedback(
        kind="optimize", summary=first.summary, evidence=evidence, suggestions=suggestions, sources=sources
    )
