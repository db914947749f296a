"""Failures of the machine rather than the program: the verifier retries them once before the fix
branch sees them.

Why: the fix branch answers a failure by changing the program (the offline coder demotes the group
to PyTorch). A verification that ran out of GPU memory while other runs' baselines held it, timed
out waiting for the device lock, or whose worker the host killed says nothing about the program,
and a demotion for it loses coverage for good. A program whose own fault it was fails the retry
too and reaches the fix branch one worker run later.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from graph.artifacts import TestResult

RETRY_PAUSE_S = 5.0  # let whatever held the memory or the lock move on
RETRY_STATUSES = ("runtime_error", "crashed", "timeout")
# (substring of the worker's message, lower case; what it means)
TRANSIENT_SIGNS = (
    ("out of memory", "the GPU ran out of memory"),
    ("cudaerrormemoryallocation", "the GPU ran out of memory"),
    ("while waiting for", "the worker timed out waiting for the device"),
    ("died with sigkill", "the host killed the worker"),
)


def transient_reason(test: TestResult) -> str | None:
    """Why this failure looks like the machine's rather than the program's, or None."""
    if test.status not in RETRY_STATUSES:
        return None
    text = test.message.lower()
    return next((meaning for sign, meaning in TRANSIENT_SIGNS if sign in text), None)


Response = TypeVar("Response")


def run_with_retry(
    run: Callable[[], Response],
    judge: Callable[[Response], TestResult],
    pause_s: float = RETRY_PAUSE_S,
) -> tuple[Response, TestResult, str | None]:
    """(response, its test, why it was retried or None): one more run after a transient failure."""
    response = run()
    test = judge(response)
    reason = transient_reason(test)
    if reason is None:
        return response, test, None
    time.sleep(pause_s)
    response = run()
    return response, judge(response), reason
