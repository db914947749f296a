"""The graph's side of the evaluation worker: requests from state, artifacts from responses.

The verifier and the profile node both talk to the isolated worker (`tools.evaluate`); this module
is the one place that turns graph state and the run's Context into an `EvalRequest` and a worker's
JSON `EvalResponse` back into typed artifacts.
"""

from __future__ import annotations

from typing import Any, cast

from graph.artifacts import BuildResult, KernelStat, Profile, Task, TestResult
from graph.context import Context
from tools import checks
from tools.protocol import Action, EvalRequest, EvalResponse, ProfileInfo


def eval_request(
    task: Task, candidate_source: str, context: Context, action: Action, plan: dict[str, Any] | None = None
) -> EvalRequest:
    """The worker request for one candidate under this run's settings.

    The plan's FLOPs and compulsory bytes travel too: from them and its GPU's ceilings the worker
    derives the speed-of-light floor below which a timed call is flagged impossible.
    """
    plan = plan or {}
    return EvalRequest(
        work_flops=int(plan.get("total_flops") or 0),
        work_bytes=int(plan.get("total_bytes") or 0),
        action=action,
        problem_name=task.name,
        problem_source=task.source,
        candidate_source=candidate_source,
        device=context.device,
        arch=context.gpu_arch,
        mode=context.tolerance_mode,
        correctness_trials=context.correctness_trials,
        perf_trials=context.perf_trials,
        time_reference=True,
        inputs_on_device=context.inputs_on_device,
        timeout_s=context.eval_timeout_s,
    )


def run_worker(request: EvalRequest, context: Context) -> EvalResponse:
    """Run the worker in its own process; candidate failures come back as statuses, never raise."""
    from tools.evaluate import evaluate  # imported late: keeps `import graph.build` light

    return evaluate(request, timeout_s=context.eval_timeout_s, sandbox=context.sandbox)


def to_build_result(response: EvalResponse) -> BuildResult:
    build = response.get("build") or {}
    return BuildResult(
        ok=bool(build.get("ok", False)),
        seconds=float(build.get("seconds", 0.0) or 0.0),
        cached=bool(build.get("cached", False)),
        errors=list(build.get("errors", []) or []),
        log_tail=str(build.get("log_tail", "") or ""),
    )


def to_test_result(response: EvalResponse, candidate_source: str) -> TestResult:
    """The verdict joins the worker's dynamic findings with the static checks of the candidate's source."""
    dynamic = cast("list[dict[str, str]]", response.get("findings") or [])  # protocol.Finding dicts
    hack = checks.hack_report(candidate_source, dynamic)
    correctness = response.get("correctness") or {}
    timing = response.get("timing") or {}
    candidate_ms = timing.get("candidate_ms")
    eager_ms = timing.get("eager_ms")
    speedup = eager_ms / candidate_ms if candidate_ms and eager_ms else None
    return TestResult(
        status=response.get("status", "crashed"),
        message=str(response.get("message", "") or ""),
        device=str(response.get("device", "") or ""),
        trials=int(correctness.get("trials", 0) or 0),
        trials_passed=int(correctness.get("passed", 0) or 0),
        max_abs_err=correctness.get("max_abs_err"),
        max_rel_err=correctness.get("max_rel_err"),
        where=str(correctness.get("where", "") or ""),
        candidate_ms=candidate_ms,
        eager_ms=eager_ms,
        speedup_vs_eager=speedup,
        seconds=float(response.get("seconds", 0.0) or 0.0),
        phases={str(k): float(v) for k, v in (response.get("phases") or {}).items()},
        findings=[{k: str(f.get(k, "")) for k in ("id", "severity", "evidence")} for f in hack["findings"]],
        verdict=hack["verdict"],
        operator_coverage=response.get("operator_coverage"),
    )


def to_profile(info: ProfileInfo, source: str = "torch_profiler") -> Profile:
    """A Profile artifact from the worker's profile section (candidate or reference)."""
    top = [
        KernelStat(
            name=str(k.get("name", "")),
            calls=int(k.get("calls", 0)),
            total_ms=float(k.get("total_ms", 0.0)),
            share=float(k.get("share", 0.0)),
        )
        for k in info.get("top", []) or []
    ]
    device_ms = float(info.get("device_ms", 0.0) or 0.0)
    kernel_count = int(info.get("kernel_count", 0) or 0)
    own = float(info.get("own_kernel_share", 0.0) or 0.0)
    lines = [f"{device_ms:.3f} ms of device time in {kernel_count} kernel launches per forward"]
    if top:
        lines.append(f"top kernel {top[0].name} takes {top[0].share:.0%}")
    lines.append(f"{own:.0%} of device time in the program's own kernels")
    return Profile(
        source=str(info.get("source", source) or source),
        device_ms=device_ms,
        kernel_count=kernel_count,
        own_kernel_share=own,
        top=top,
        summary="; ".join(lines),
    )
