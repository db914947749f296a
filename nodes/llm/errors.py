"""Errors of the LLM policy, each with a one-line message a node can put in state or a report.

Three families, because each calls for a different edge of the graph:
- `LLMSettingsError`: the run is misconfigured (no model, no key, a bad number); nothing to retry.
- `LLMCallError`: the endpoint failed after the client's retries (timeout, 429/5xx, refused,
  unreadable HTTP); the run cannot continue with this model.
- `ModelOutputError`: the model answered, but not with something usable; that answer is evidence
  for the next step. It is a `graph.policy.PolicyOutputError`, so the coder node turns the coder's
  case, `CoderOutputError`, into `Feedback(kind="parse_error")` (`CoderOutputError.feedback()` has
  the evidence ready) and takes the fix branch.
"""

from __future__ import annotations

from graph.artifacts import Feedback
from graph.policy import PolicyOutputError, PolicyUnavailableError


def one_line(text: str, limit: int = 400) -> str:
    """Collapse whitespace and cut to `limit` characters, so messages stay one readable line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class LLMPolicyError(Exception):
    """Base class; str() is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    @property
    def message(self) -> str:
        return str(self)


class LLMSettingsError(LLMPolicyError, PolicyUnavailableError, ValueError):
    """Model settings are missing or invalid (the message names the field or variable)."""


class LLMCallError(LLMPolicyError, PolicyUnavailableError):
    """The model endpoint failed after retries: timeout, rate limit, server error, unreadable reply."""


class ModelOutputError(LLMPolicyError, PolicyOutputError):
    """The model answered, but the answer could not be used."""

    def __init__(self, message: str, *, role: str, raw: str = "", finish_reason: str | None = None) -> None:
        super().__init__(message)
        self.role = role
        self.raw = raw
        self.finish_reason = finish_reason

    def excerpt(self, limit: int = 2000) -> str:
        """The start and end of the raw answer, enough to show the model what went wrong."""
        if len(self.raw) <= limit:
            return self.raw
        half = limit // 2
        return f"{self.raw[:half]}\n[... {len(self.raw) - limit} characters omitted ...]\n{self.raw[-half:]}"


class StructuredOutputError(ModelOutputError):
    """No structured-output method produced a valid artifact (planner, verifier)."""


class CoderOutputError(ModelOutputError):
    """The coder's answer holds no complete, parseable program defining ModelNew."""

    def __init__(self, message: str, *, raw: str = "", finish_reason: str | None = None) -> None:
        super().__init__(message, role="coder", raw=raw, finish_reason=finish_reason)

    def feedback(self) -> Feedback:
        """The fix branch's evidence: what was wrong with the answer and how to answer instead."""
        suggestions = [
            "Answer with one ```python fenced block holding the whole program, and nothing after it.",
            "Define class ModelNew(nn.Module) at module level with the reference's signatures.",
        ]
        if self.finish_reason == "length":
            suggestions.insert(0, "The answer hit the token limit: write a shorter program (fewer kernels).")
        return Feedback(
            kind="parse_error",
            summary=str(self),
            evidence=self.excerpt(),
            suggestions=suggestions,
        )
