"""The graph's side of the evaluation worker: requests from state, artifacts from responses.

The verifier and the profile node both talk to the isolated worker (`tools.evaluate`); this module
is the one place that turns graph state and the run's Context into an `EvalRequest` and a worker's
JSON `EvalResponse` back into typed artifacts.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from graph.artifacts import BuildResult, Candidate, KernelStat, Profile, Task, TestResult
from graph.context import Context
from tools import checks
from tools.protocol import Action, EvalRequest, EvalResponse, Finding, ProfileInfo, TimingInfo


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
        compile_modes=[m.strip() for m in context.compile_modes.split(",") if m.strip()],
        inputs_on_device=context.inputs_on_device,
        timeout_s=context.eval_timeout_s,
    )


def run_worker(request: EvalRequest, context: Context) -> EvalResponse:
    """Run the worker in its own process; candidate failures come back as statuses, never raise."""
    from tools.evaluate import evaluate  # imported late: keeps `import graph.build` light

    return evaluate(request, timeout_s=context.eval_timeout_s, sandbox=context.sandbox)


def kernelbench_cross_check(task: Task, candidate: Candidate, context: Context) -> dict[str, Any]:
    """The verdict of KernelBench's rules and process state on a program strict mode passed.

    One more worker run (the build is cached; correctness only, no timing): the answer to "would
    KernelBench's own harness accept this?", which users compare systems by (docs/kernelbench.md §5).
    """
    request = eval_request(task, candidate.source, context, "verify")
    request["mode"] = "kernelbench"
    request["correctness_only"] = True
    request["dynamic_checks"] = False
    request["inputs_on_device"] = False
    response = run_worker(request, context)
    correctness = response.get("correctness") or {}
    tolerance = float(request.get("atol", 1e-4))
    return {
        "status": response.get("status", "crashed"),
        "message": str(response.get("message", "") or ""),
        "max_abs_err": correctness.get("max_abs_err"),
        "reference_tf32_spread": correctness.get("reference_tf32_spread"),
        "tolerance": tolerance,
        "seconds": float(response.get("seconds", 0.0) or 0.0),
        "phases": {str(k): float(v) for k, v in (response.get("phases") or {}).items()},
    }


def kernelbench_line(check: dict[str, Any] | None) -> str:
    """'verified (strict); KernelBench harness: fails at max diff X because Y', or agreement."""
    if not check:
        return "strict (KernelBench-harness cross-check not run)"
    status = check.get("status")
    if status == "passed":
        return "verified (strict); KernelBench harness: passes"
    if status != "wrong_output":
        first = (check.get("message") or status or "").splitlines()[0] if check.get("message") else status
        return f"verified (strict); KernelBench harness: {status}: {first}"
    diff = check.get("max_abs_err")
    spread = check.get("reference_tf32_spread")
    tolerance = check.get("tolerance") or 1e-4
    if spread is not None and spread > tolerance:
        why = (
            f"the reference itself moves by {spread:.3g} between cuDNN TF32 on and off (KernelBench keeps "
            f"PyTorch's default, TF32 on), so its {tolerance:g} tolerance asks for eager's TF32 rounding"
        )
    elif spread is not None:
        why = f"it differs from the TF32 reference beyond the reference's own TF32 spread ({spread:.3g})"
    else:
        why = "it differs from the reference beyond the tolerance under KernelBench's process state"
    shown = "?" if diff is None else f"{diff:.3g}"
    return f"verified (strict); KernelBench harness: fails at max diff {shown} because {why}"


def to_build_result(response: EvalResponse) -> BuildResult:
    build = response.get("build") or {}
    return BuildResult(
        ok=bool(build.get("ok", False)),
        seconds=float(build.get("seconds", 0.0) or 0.0),
        cached=bool(build.get("cached", False)),
        errors=list(build.get("errors", []) or []),
        log_tail=str(build.get("log_tail", "") or ""),
    )


def _stat_ms(timing: TimingInfo, who: Literal["candidate", "eager"], stat: str) -> float | None:
    value = (timing.get(who) or {}).get(stat)
    return float(value) if isinstance(value, (int, float)) else None


def to_test_result(response: EvalResponse, candidate_source: str) -> TestResult:
    """The verdict joins the worker's dynamic findings with the static checks of the candidate's source."""
    dynamic = cast("list[Finding]", response.get("findings") or [])
    hack = checks.hack_report(candidate_source, dynamic)
    correctness = response.get("correctness") or {}
    timing = response.get("timing") or {}
    candidate_ms = timing.get("candidate_ms")
    eager_ms = timing.get("eager_ms")
    speedup = eager_ms / candidate_ms if candidate_ms and eager_ms else None
    ratio = (timing.get("ratios") or {}).get("eager") or {}
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
        speedup_cv=ratio.get("cv") if speedup is not None else None,
        speedup_rounds=int(ratio.get("rounds", 0) or 0) if speedup is not None else 0,
        compile_ms={str(k): float(v) for k, v in (timing.get("compile_ms") or {}).items()},
        candidate_issue_ms=_stat_ms(timing, "candidate", "issue_mean_ms"),
        eager_issue_ms=_stat_ms(timing, "eager", "issue_mean_ms"),
        eager_median_ms=_stat_ms(timing, "eager", "median_ms"),
        seconds=float(response.get("seconds", 0.0) or 0.0),
        phases={str(k): float(v) for k, v in (response.get("phases") or {}).items()},
        findings=[{k: str(f.get(k, "")) for k in ("id", "severity", "evidence")} for f in hack["findings"]],
        verdict=hack["verdict"],
        operator_coverage=response.get("operator_coverage"),
        reference_split=(response.get("profile_split") or {}).get("reference"),
        profile=dict(response["profile"]) if isinstance(response.get("profile"), dict) else None,
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
