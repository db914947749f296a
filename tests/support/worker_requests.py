"""Requests for the evaluation worker on the CPU: the affine problem and the candidates written for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.protocol import EvalRequest

REPO = Path(__file__).resolve().parents[2]
WORKER_CANDIDATES = REPO / "tests" / "candidates" / "worker"


def worker_candidate(name: str) -> str:
    """The source of tests/candidates/worker/<name>."""
    return (WORKER_CANDIDATES / name).read_text()


def affine_request(candidate_source: str, cache_dir: Path, /, **overrides: Any) -> EvalRequest:
    """A CPU verify request of `candidate_source` against the affine problem (y = scale * x + bias).

    overrides: any request field, `candidate_source` included (a bad request's empty source).
    """
    request = EvalRequest(
        action="verify",
        problem_name="affine",
        problem_source=worker_candidate("affine_problem.py"),
        candidate_source=candidate_source,
        device="cpu",
        perf_trials=20,
        cache_dir=str(cache_dir),
    )
    request.update(overrides)  # type: ignore[typeddict-item]
    return request
