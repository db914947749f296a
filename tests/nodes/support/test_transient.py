"""A failure of the machine (GPU memory, the device lock, the host's OOM killer) is verified again,
after growing pauses, before the fix branch may change the program for it; a program's own fault is not."""

from __future__ import annotations

from typing import Any

import pytest

from nodes.support.transient import run_with_retry, transient_reason
from nodes.support.worker_client import to_test_result

OOM = (
    "ModelNew.forward raised on correctness trial 1: OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 2.00 GiB"
)


def _judge(response: dict[str, Any]) -> Any:
    return to_test_result(response, "class ModelNew: pass\n")


@pytest.mark.parametrize(
    ("status", "message", "transient"),
    [
        ("runtime_error", OOM, True),
        ("runtime_error", "stitch group g1 (axis) failed: cudaErrorMemoryAllocation", True),
        ("timeout", "timed out after 600 s while waiting for the device lock", True),
        ("crashed", "the worker died with SIGKILL while checking correctness", True),
        ("crashed", "the worker died with SIGSEGV while checking correctness", False),  # the program's
        ("runtime_error", "stitch group g1 (axis) failed: an illegal memory access", False),
        ("wrong_output", "out of memory", False),  # a wrong answer is the program's, whatever it says
        ("passed", "", False),
    ],
)
def test_which_failures_count_as_the_machines(status: str, message: str, transient: bool) -> None:
    assert (transient_reason(_judge({"status": status, "message": message})) is not None) == transient


def test_a_transient_failure_is_run_again_until_an_answer_is_not_transient() -> None:
    answers = [
        {"status": "runtime_error", "message": OOM},
        {"status": "timeout", "message": "timed out after 600 s while waiting for the device lock"},
        {"status": "passed", "message": "ok"},
    ]
    calls: list[int] = []

    def run() -> dict[str, Any]:
        calls.append(1)
        return answers[len(calls) - 1]

    response, test, why = run_with_retry(run, _judge, pauses_s=(0.0, 0.0, 0.0))
    assert len(calls) == 3 and test.status == "passed" and why == "the GPU ran out of memory"
    assert response["message"] == "ok"


def test_a_programs_own_failure_is_not_retried_and_the_retries_are_bounded() -> None:
    calls: list[int] = []

    def wrong() -> dict[str, Any]:
        calls.append(1)
        return {"status": "wrong_output", "message": "max abs err 1.0"}

    assert run_with_retry(wrong, _judge, pauses_s=(0.0, 0.0))[2] is None and len(calls) == 1

    def always_oom() -> dict[str, Any]:
        calls.append(1)
        return {"status": "runtime_error", "message": OOM}

    _, test, why = run_with_retry(always_oom, _judge, pauses_s=(0.0, 0.0))
    assert test.status == "runtime_error" and why is not None and len(calls) == 4  # two retries, no more
