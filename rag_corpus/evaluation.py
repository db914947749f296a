"""Retrieval quality: recall@k over queries phrased the way the verifier phrases a diagnosis."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.embeddings import Embeddings

from rag_corpus.errors import RagError
from rag_corpus.store import open_store

EVAL_QUERIES = Path(__file__).resolve().parent / "eval_queries.jsonl"


@dataclass(frozen=True)
class EvalQuery:
    """A symptom-style query and the note ids that should answer it."""

    query: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class EvalMiss:
    """A query whose top k held none of the expected notes."""

    query: str
    expected: tuple[str, ...]
    retrieved: tuple[str, ...]


@dataclass(frozen=True)
class EvalReport:
    """recall@k: share of queries with at least one expected id in the top k;
    mean_fraction: mean share of each query's expected ids found in its top k."""

    k: int
    queries: int
    recall: float
    mean_fraction: float
    misses: list[EvalMiss] = field(default_factory=list)


def load_queries(path: Path = EVAL_QUERIES) -> list[EvalQuery]:
    """Read the JSONL evaluation set; each line is {"query": str, "expected": [note ids]}."""
    queries: list[EvalQuery] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            query, expected = row["query"], row["expected"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise RagError(f"{path}:{number}: expected a JSON object with 'query' and 'expected'") from None
        if not isinstance(query, str) or not query.strip() or not isinstance(expected, list) or not expected:
            raise RagError(
                f"{path}:{number}: 'query' must be text and 'expected' a non-empty list of note ids"
            )
        queries.append(EvalQuery(query, tuple(expected)))
    return queries


def evaluate(
    k: int = 3,
    *,
    store_dir: str | Path | None = None,
    embedder: str | Embeddings | None = None,
    queries_path: Path = EVAL_QUERIES,
) -> EvalReport:
    """Run every evaluation query against the notes (ingested documents are left out)."""
    store = open_store(store_dir, embedder)
    queries = load_queries(queries_path)
    hits, fractions, misses = 0, [], []
    for item in queries:
        got = tuple(hit.id for hit in store.retrieve(item.query, k=k, where={"kind": "note"}))
        found = [e for e in item.expected if e in got]
        fractions.append(len(found) / len(item.expected))
        if found:
            hits += 1
        else:
            misses.append(EvalMiss(item.query, item.expected, got))
    return EvalReport(k, len(queries), hits / len(queries), sum(fractions) / len(queries), misses)
