"""Every coder turn of a run, kept as training data in OUT/turns.jsonl.

Why: the coder's two skills are trained from what runs produce. Each turn is written as it happens
(one JSON line, flushed), so a crash loses nothing already recorded, and the file is what
`stitchcuda rl dataset` reads. Three kinds of line, all carrying the run's id (the checkpoint thread):

- `run`: once per run, the problem (name, level, path, source) and the plan;
- `turn`: one coder turn: skill (write or revise), mode, the messages an LLM coder is sent for it
  (built by `nodes.llm.prompting`, the LLM policy's own prompt code; the LLM policy's exact messages
  and raw answer when it wrote the turn), the answer, the program, the feedback and the previous
  program it revised, or the error when the answer was unusable;
- `outcome`: the verifier's result for one candidate (status, hack verdict and findings, timing),
  written when the next coder turn or finalize sees it.

The offline policy's turns get the messages of an LLM coder with no starting point (hybrid start
off): with it, the prompt would contain the very program that is the answer. A line is appended
again when a node re-runs after a resume; the dataset builder keeps the last line per key.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from graph.artifacts import Candidate, Feedback, Plan, Task
from graph.context import Context
from graph.state import State

log = logging.getLogger(__name__)

TURNS_FILE = "turns.jsonl"
FORMAT = 1
ROLE_NAMES = {"human": "user", "ai": "assistant"}  # langchain's tuple roles -> chat-template roles


def run_id() -> str:
    """The checkpoint thread of the running graph (the CLI prints it), else 'run'."""
    try:
        from langgraph.config import get_config

        return str(get_config().get("configurable", {}).get("thread_id") or "run")
    except RuntimeError:  # called outside a graph run
        return "run"


def chat_messages(messages: list[tuple[str, str]] | list[dict[str, str]]) -> list[dict[str, str]]:
    """(role, text) pairs as chat-template messages ({"role": system|user|assistant, "content"})."""
    out = []
    for item in messages:
        role, text = (item["role"], item["content"]) if isinstance(item, dict) else item
        out.append({"role": ROLE_NAMES.get(role, role), "content": text})
    return out


def answer_text(candidate: Candidate) -> str:
    """A program as a coder model answers with it: the summary line, then one fenced block."""
    from nodes.llm.prompting import fence

    summary = candidate.summary.strip() or "the complete program"
    return f"Summary: {summary}\n\n{fence(candidate.source, 'python')}\n"


class TurnLog:
    """Appends the records of one run to OUT/turns.jsonl; does nothing without an out_dir."""

    def __init__(self, context: Context, run: str | None = None) -> None:
        self.context = context
        self.path = Path(context.out_dir) / TURNS_FILE if context.out_dir else None
        self.run = run or run_id()

    def _append(self, record: dict[str, Any]) -> None:
        if self.path is None:
            return
        record = {"format": FORMAT, "run": self.run, "time": round(time.time(), 3), **record}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, default=str) + "\n")
        except OSError as exc:  # the run goes on; the log is a by-product
            log.warning("cannot append to %s: %s", self.path, exc)

    def run_started(self, task: Task, plan: Plan) -> None:
        self._append(
            {
                "type": "run",
                "problem": {"name": task.name, "level": task.level, "path": task.path, "source": task.source},
                "plan": plan.dump(),
                "policy": self.context.policy,
                "gpu_arch": self.context.gpu_arch,
                "tolerance_mode": self.context.tolerance_mode,
            }
        )

    def turn(
        self,
        *,
        iteration: int,
        mode: str,
        messages: list[dict[str, str]],
        answer: str,
        candidate: Candidate | None,
        feedback: Feedback | None,
        previous: Candidate | None,
        error: str | None = None,
    ) -> None:
        self._append(
            {
                "type": "turn",
                "turn": iteration,
                "skill": "write" if mode == "write" else "revise",
                "mode": mode,
                "policy": self.context.policy,
                "candidate": candidate.id if candidate else None,
                "messages": messages,
                "answer": answer,
                "program": candidate.source if candidate else None,
                "summary": candidate.summary if candidate else "",
                "feedback": feedback.dump() if feedback else None,
                "previous": {"id": previous.id, "source": previous.source} if previous else None,
                "error": error,
            }
        )

    def record(
        self,
        policy: Any,
        task: Task,
        plan: Plan,
        iteration: int,
        mode: str,
        previous: Candidate | None,
        feedback: Feedback | None,
        candidate: Candidate | None,
        *,
        error: str | None = None,
        raw: str = "",
    ) -> None:
        """One coder turn: the LLM policy's exact exchange (`last_exchange`), else the messages it would get."""
        exchange = getattr(policy, "last_exchange", None)
        turn_mode = mode if previous is not None else "write"
        if exchange:
            messages, answer = chat_messages(exchange["messages"]), exchange["answer"]
        else:
            messages = prompt_messages(self.context, task, plan, turn_mode, previous, feedback)
            answer = answer_text(candidate) if candidate else raw
        self.turn(
            iteration=iteration,
            mode=turn_mode,
            messages=messages,
            answer=answer,
            candidate=candidate,
            feedback=feedback,
            previous=previous,
            error=error,
        )

    def outcome(self, state: State) -> None:
        """The verifier's result for the state's current candidate, when it has one."""
        candidate, test = state.get("candidate"), state.get("test")
        if not candidate or not test:
            return
        build = state.get("build") or {}
        self._append(
            {
                "type": "outcome",
                "candidate": candidate["id"],
                "status": test.get("status"),
                "verdict": test.get("verdict"),
                "findings": [f for f in test.get("findings") or [] if f.get("severity") != "info"],
                "message": (test.get("message") or "")[:2000],
                "device": test.get("device"),
                "trials": test.get("trials"),
                "trials_passed": test.get("trials_passed"),
                "candidate_ms": test.get("candidate_ms"),
                "eager_ms": test.get("eager_ms"),
                "speedup_vs_eager": test.get("speedup_vs_eager"),
                "operator_coverage": test.get("operator_coverage"),
                "build_ok": build.get("ok"),
                "build_errors": (build.get("errors") or [])[:5],
            }
        )

    def finished(self, status: str, reason: str, best_id: int | None) -> None:
        self._append({"type": "final", "status": status, "reason": reason, "best": best_id})


def prompt_messages(
    context: Context,
    task: Task,
    plan: Plan,
    mode: str,
    previous: Candidate | None,
    feedback: Feedback | None,
) -> list[dict[str, str]]:
    """The messages an LLM coder is sent for this turn (write, a write retry, fix or optimise)."""
    from nodes.llm import prompting

    if mode == "write" or previous is None:
        pairs = prompting.coder_write_messages(context, task, plan, None, feedback)
    else:
        assert feedback is not None
        pairs = prompting.coder_revise_messages(context, task, plan, previous, feedback, mode)
    return chat_messages(pairs)
