"""Verifier node: build, check and time the candidate in the isolated worker; judge the outcome."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from graph.artifacts import Attempt, Best, BuildResult, Candidate, Feedback, Task, TestResult
from graph.context import Context
from graph.state import State, read, read_optional
from nodes.support.budget import charged
from nodes.support.speed import beats
from nodes.support.transient import run_with_retry
from nodes.support.worker_client import (
    eval_request,
    run_worker,
    to_build_result,
    to_test_result,
)

ATTEMPT_MESSAGE_CHARS = 400  # the history keeps the head of each worker message (the report shows it)


def failure_feedback(build: BuildResult, test: TestResult) -> Feedback:
    """Evidence for the fix branch: the compiler's errors or the numbers that went wrong."""
    status = test.status
    if status == "build_error":
        errors = "\n".join(build.errors[:10]) or build.log_tail[-2000:]
        return Feedback(
            kind="build_error",
            summary=f"the extension did not build: {build.errors[0] if build.errors else test.message}",
            evidence=errors,
            suggestions=["fix the first compiler error; later errors often follow from it"],
        )
    if status == "wrong_output":
        return Feedback(
            kind="wrong_output",
            summary=f"output differs from the reference ({test.trials_passed}/{test.trials} trials passed)",
            evidence=(
                f"{test.message}\nmax abs error {test.max_abs_err}, max rel error {test.max_rel_err}, "
                f"worst element at {test.where or '?'}"
            ),
            suggestions=[
                "check indexing, bounds and the tail handling of the kernel that produces this output",
                "move the most complex fused group to a simpler implementation",
            ],
        )
    kind: Literal["timeout", "runtime_error"] = "timeout" if status == "timeout" else "runtime_error"
    return Feedback(
        kind=kind,
        summary=f"the program {'timed out' if kind == 'timeout' else 'failed at run time'}: "
        f"{test.message.splitlines()[0] if test.message else status}",
        evidence=test.message,
        suggestions=["check launch configuration, pointer arguments and every CUDA error code"],
    )


def hacked_feedback(test: TestResult) -> Feedback:
    """Evidence for the fix branch when a program passed but the hack checks found an error."""
    errors = [f for f in test.findings if f.get("severity") == "error"]
    return Feedback(
        kind="hacked",
        summary=f"the program passed, but the hack checks rejected it: {', '.join(f['id'] for f in errors)}",
        evidence="\n".join(f"{f['id']}: {f['evidence']}" for f in errors),
        suggestions=[
            "do the work in the program's own kernels, inside forward, on the current stream, every call",
            "remove whatever each finding names; a program with an error finding is never reported",
        ],
    )


def measured_reference_split(state: State) -> dict[str, Any] | None:
    """The reference's profile split an earlier verification of this run measured, if any."""
    best = read_optional(state, "best", Best)
    last = read_optional(state, "test", TestResult)
    for test in (best.test if best else None, last):
        if test is not None and test.reference_split:
            return dict(test.reference_split)
    return None


@charged
def verifier(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Evaluate the current candidate; keep the best verified one; give the fix branch its evidence."""
    context = runtime.context
    task = read(state, "task", Task)
    candidate = read(state, "candidate", Candidate)
    request = eval_request(task, candidate.source, context, "verify", state.get("plan"))
    reference_split = measured_reference_split(state)
    if reference_split is not None:
        request["reference_split"] = reference_split
    response, test, retried = run_with_retry(
        lambda: run_worker(request, context), lambda r: to_test_result(r, candidate.source)
    )
    build = to_build_result(response)
    again = f"[verified again: {retried}] " if retried else ""
    attempt = Attempt(
        candidate=candidate.id,
        mode=candidate.mode,
        status=test.status,
        candidate_ms=test.candidate_ms,
        speedup_vs_eager=test.speedup_vs_eager,
        build_seconds=build.seconds,
        eval_seconds=test.seconds,
        phases=test.phases,
        summary=candidate.summary,
        verdict=test.verdict,
        message=(again + test.message)[:ATTEMPT_MESSAGE_CHARS],
    )
    update: dict[str, Any] = {"build": build.dump(), "test": test.dump(), "history": [attempt.dump()]}

    if test.status == "passed" and test.verdict != "hacked":
        best = read_optional(state, "best", Best)
        best_ms = best.test.candidate_ms if best else None
        gain = best_ms / test.candidate_ms - 1.0 if best_ms and test.candidate_ms else None
        if best is not None and best.test.speedup_vs_eager and test.speedup_vs_eager:
            gain = test.speedup_vs_eager / best.test.speedup_vs_eager - 1.0  # side by side in each window
        if beats(test, best.test if best else None):
            update["best"] = Best(candidate=candidate, test=test, build=build).dump()
        update |= {"fix_streak": 0, "last_gain": gain, "coder_mode": "optimize"}
        speed = (
            f"{test.candidate_ms:.3f} ms vs eager {test.eager_ms:.3f} ms" if test.candidate_ms else "untimed"
        )
        line = f" passed ({speed})"
    elif test.status == "no_gpu":
        line = f" built in {build.seconds:.1f} s; {test.message}"
    else:
        feedback = hacked_feedback(test) if test.status == "passed" else failure_feedback(build, test)
        update |= {
            "feedback": feedback.dump(),
            "coder_mode": "fix",
            "fix_streak": state.get("fix_streak", 0) + 1,
        }
        line = f": {'hacked' if feedback.kind == 'hacked' else test.status}: {feedback.summary}"
    retry_note = [f"verifier: candidate {candidate.id} verified again: {retried}"] if retried else []
    update["log"] = [*retry_note, f"verifier: candidate {candidate.id}{line}"]
    return update
