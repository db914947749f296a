"""Failures of the machine rather than the program: the verifier runs them again, after growing
pauses, before the fix branch sees them.

Why: the fix branch answers a failure by changing the program (the offline coder demotes the group
to PyTorch). A verification that ran out of GPU memory while other runs' baselines held it, timed
out waiting for the device lock, or whose worker the host killed says nothing about the program,
and a demotion for it loses coverage for good. The pauses grow because what holds the memory may
hold it for a while: another problem's torch.compile baselines keep their model, inputs and CUDA
graphs through minutes of compilation. (The H100 eval of 2026-12-05 demoted three problems with
2 GiB inputs, started within 22 s of each other among twelve runs, after a first failure whose
message was not kept; memory held by other runs is the suspect.) A program whose own fault it was
fails every retry too and reaches the fix branch a few worker runs later.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from graph.artifacts import TestResult

# Before each further run: let whatever held the memory or the lock move on.
RETRY_PAUSES_S = (5.0, 20.0, 60.0)
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
    pauses_s: tuple[float, ...] = RETRY_PAUSES_S,
) -> tuple[Response, TestResult, str | None]:
    """(response, its test, why it was retried or None): after a transient failure, one more run per
    pause until a run's failure is not transient (or it passes); the last answer stands."""
    response = run()
    test = judge(response)
    first = reason = transient_reason(test)
    for pause in pauses_s:
        if reason is None:
            break
        time.sleep(pause)
        response = run()
        test = judge(response)
        reason = transient_reason(test)
    return response, test, first
