"""How a worker run reports: the Outcome that ends it early, the progress file, one-line exceptions.

Why: the parent may have to kill the worker at any moment, so `Progress` keeps a file holding the
current phase and the partial answer (what the parent then reports); every other way a run ends is
an `Outcome` with a status, a message and the findings that explain it; and a candidate's exception
is summarised by its own frames (`candidate.py:32 in forward`), which the coder can act on.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path

import torch

from tools.process import write_atomic
from tools.protocol import EvalResponse, Finding, json_safe


class Outcome(Exception):
    """Ends a run early with a final status, a message and the findings that explain it."""

    def __init__(self, status: str, message: str, findings: list[Finding] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.findings = findings or []


class Progress:
    """Keeps <path> holding {"phase", "response"}: what the parent reports if it must kill us."""

    def __init__(self, path: str | None, response: EvalResponse) -> None:
        self.path = path
        self.response = response
        self._phase_started = time.monotonic()

    def __call__(self, phase: str) -> None:
        """Enter `phase`; the time spent in the previous one goes to response["phases"] (seconds)."""
        now = time.monotonic()
        previous = self.response.get("phase")
        if previous:
            phases = self.response.setdefault("phases", {})  # type: ignore[typeddict-item]
            phases[previous] = round(phases.get(previous, 0.0) + now - self._phase_started, 3)
        self._phase_started = now
        self.response["phase"] = phase
        if not self.path:
            return
        write_atomic(self.path, json.dumps({"phase": phase, "response": json_safe(dict(self.response))}))


_LIBRARY_DIRS = (str(Path(torch.__file__).resolve().parent), str(Path(__file__).resolve().parents[1]))


def exception_summary(exc: BaseException, frames: int = 3) -> str:
    """'Type: first line of the message' plus the program's last frames as 'file:line in func: code'.

    Frames inside torch and the harness are left out when the program's own frames remain: the
    coder can act on `candidate.py:32 in forward`, not on torch's module dispatch.
    """
    text = str(exc).strip().splitlines()
    lines = [f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__]
    stack = traceback.extract_tb(exc.__traceback__)
    own = [f for f in stack if not os.path.abspath(f.filename).startswith(_LIBRARY_DIRS)]
    for frame in (own or stack)[-frames:]:
        code = (frame.line or "").strip()
        lines.append(f"  {Path(frame.filename).name}:{frame.lineno} in {frame.name}: {code}")
    return "\n".join(lines)
