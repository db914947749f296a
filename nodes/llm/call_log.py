"""A record of every model call: role, model, latency, answer size and what became of the answer.

Why: a real model fails in ways a run's final status hides (an answer cut at the token limit, a
server that ignores `response_format`, a plan that had to be repaired), and a slow local model
makes each call worth seeing. Every HTTP request the LLM policy makes is one `ModelCall`, with one
of four outcomes:

- `parsed`: the answer was used as it came (JSON matching the schema, one fenced program);
- `repaired`: used after a repair the record names (JSON dug out of prose, an unfenced program);
- `rejected`: the answer arrived but could not be used, and the record says why;
- `failed`: no answer (timeout, refused connection, HTTP error after retries).

Records reach the graph state (`State.model_calls`) through `collect_model_calls`, which wraps the
nodes that ask the policy; when the Context names an out_dir they are also appended to
`OUT/model_calls.jsonl` as they happen, so an interrupted run keeps them and a slow one can be
watched with `tail -f`.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from nodes.llm.errors import one_line
from nodes.llm.settings import RoleSettings

log = logging.getLogger(__name__)

Outcome = Literal["parsed", "repaired", "rejected", "failed"]
OUTCOMES: tuple[str, ...] = ("parsed", "repaired", "rejected", "failed")
CALLS_FILE = "model_calls.jsonl"

_collected: ContextVar[list[dict[str, Any]] | None] = ContextVar("stitchcuda_model_calls", default=None)

F = TypeVar("F", bound=Callable[..., dict[str, Any]])


@dataclass(frozen=True)
class ModelCall:
    """One request to a model endpoint and what became of its answer."""

    role: str
    model: str
    base_url: str
    outcome: Outcome
    detail: str = ""
    mode: str | None = None  # the coder's write / fix / optimize
    method: str | None = None  # structured output: json_schema, function_calling or text
    candidate: int | None = None
    latency_s: float = 0.0
    answer_chars: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    at: float = field(default_factory=time.time)

    def dump(self) -> dict[str, Any]:
        return asdict(self)


def answer_text(message: Any) -> str:
    """The text of an AIMessage: its content plus the arguments of any tool calls."""
    content = getattr(message, "content", "")
    if isinstance(content, list):
        content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    parts = [str(content or "")]
    for call in getattr(message, "tool_calls", None) or []:
        parts.append(json.dumps(call.get("args", {})))
    for call in getattr(message, "invalid_tool_calls", None) or []:
        parts.append(str(call.get("args") or ""))
    return "".join(parts)


@dataclass(frozen=True)
class CallRecorder:
    """Makes and keeps the `ModelCall`s of one role's policy step (one plan, one program, one advice)."""

    settings: RoleSettings
    out_dir: str = ""
    mode: str | None = None
    candidate: int | None = None

    def record(
        self,
        started: float,
        outcome: Outcome,
        detail: str = "",
        *,
        message: Any = None,
        method: str | None = None,
        finish_reason: str | None = None,
    ) -> ModelCall:
        """Record a call that began at `started` (time.monotonic()) and ended now."""
        usage = getattr(message, "usage_metadata", None) or {}
        metadata = getattr(message, "response_metadata", None) or {}
        call = ModelCall(
            role=self.settings.role,
            model=self.settings.model,
            base_url=self.settings.base_url or "openai",
            outcome=outcome,
            detail=one_line(detail, 300),
            mode=self.mode,
            method=method,
            candidate=self.candidate,
            latency_s=round(time.monotonic() - started, 3),
            answer_chars=len(answer_text(message)) if message is not None else 0,
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
            finish_reason=finish_reason or metadata.get("finish_reason"),
        )
        record_call(call, self.out_dir)
        return call


def record_call(call: ModelCall, out_dir: str = "") -> None:
    """Keep `call` for the running node's update and append it to OUT/model_calls.jsonl."""
    entry = call.dump()
    collected = _collected.get()
    if collected is not None:
        collected.append(entry)
    if out_dir:
        try:
            path = Path(out_dir) / CALLS_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")
        except OSError as exc:  # the record still reaches the state; a full disk must not end the run
            log.warning("cannot append to %s: %s", Path(out_dir) / CALLS_FILE, exc)


@contextmanager
def collecting() -> Iterator[list[dict[str, Any]]]:
    """Gather the calls recorded inside the block (in this thread and context) into a list."""
    calls: list[dict[str, Any]] = []
    token = _collected.set(calls)
    try:
        yield calls
    finally:
        _collected.reset(token)


def collect_model_calls(node: F) -> F:
    """Wrap a graph node so the model calls made during it land in its update as `model_calls`."""

    @functools.wraps(node)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        with collecting() as calls:
            update = node(*args, **kwargs)
        if calls:
            update = {**update, "model_calls": [*update.get("model_calls", []), *calls]}
        return update

    return wrapper  # type: ignore[return-value]


def summarize(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per outcome and role, and the time spent waiting for models."""
    by_outcome = {name: sum(1 for c in calls if c.get("outcome") == name) for name in OUTCOMES}
    roles = sorted({c.get("role", "") for c in calls})
    return {
        "calls": len(calls),
        "outcomes": by_outcome,
        "by_role": {role: sum(1 for c in calls if c.get("role") == role) for role in roles},
        "models": sorted({c.get("model", "") for c in calls}),
        "latency_s": round(sum(c.get("latency_s") or 0.0 for c in calls), 3),
    }


def short_model(name: str) -> str:
    """A served checkpoint is often named by its path; its last part is what a reader recognises."""
    return name.rstrip("/").rsplit("/", 1)[-1] if name.startswith(("/", "./", "~")) else name


def call_step(call: dict[str, Any]) -> str:
    """What the call was for, in a few words: the coder's mode, the structured-output method, the candidate."""
    candidate = call.get("candidate")
    parts = (call.get("mode"), call.get("method"), f"#{candidate}" if candidate else None)
    return " ".join(str(part) for part in parts if part) or "-"


def summary_line(calls: list[dict[str, Any]]) -> str:
    """'3 calls (3 rejected); 401.6 s waiting for MODEL.': the totals above a table of the calls."""
    summary = summarize(calls)
    counts = ", ".join(f"{n} {name}" for name, n in summary["outcomes"].items() if n)
    models = ", ".join(summary["models"])
    return f"{summary['calls']} calls ({counts}); {summary['latency_s']:.1f} s waiting for {models}."
