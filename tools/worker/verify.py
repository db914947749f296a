"""The verify action: correctness trials, then timing, then (strict mode) the profile-based hack checks.

Why in this order: a wrong answer ends the run before anything is timed, and the profile checks
(which kernels really ran, how much of the reference's work left PyTorch) need the timing's input
sets. KernelBench mode times the same tensors every call, as KernelBench does; strict mode rotates
fresh input sets and checks every timed output (tools.worker.timing says why).
"""

from __future__ import annotations

import math
import time
import types
from collections.abc import Callable
from typing import Any

import torch

from tools.protocol import FIRST_CALL_PHASE, EvalRequest, EvalResponse, Finding, finding
from tools.worker import dynamic_checks, timing_window, torch_profile
from tools.worker.compiled import compile_mode
from tools.worker.correctness import ForwardError, check_correctness
from tools.worker.guards import check_guards
from tools.worker.harness import (
    BUDGET_SHARE,
    Harness,
    Settings,
    TimingCheckError,
    output_check,
    run_or_fail,
    timing_sets,
)
from tools.worker.inputs import prepare_inputs, set_seed
from tools.worker.kernelbench_state import reference_tf32_spread
from tools.worker.reporting import Outcome, Progress, exception_summary
from tools.worker.rounds import Contestant, ContestantFailed, time_in_rounds

EXCESSIVE_SPEEDUP = 10.0  # KernelBench's flag (a note, not a failure)


def timing_findings(info: dict[str, Any]) -> list[Finding]:
    """What the timing shows: escaped work, disagreeing clocks, a suspicious speedup.

    A call below the physical floor (`impossible_speed`) is judged by the parent (tools.evaluate),
    which knows the GPU's ceilings; the worker reports the times it measured.
    """
    found: list[Finding] = []
    stats = info.get("candidate", {})
    if stats.get("off_stream"):
        found.append(
            finding(
                "off_stream_work",
                "error",
                f"work escaped the current stream: {stats['stream_mean_ms']:.4g} ms on the stream's events, "
                f"{stats['device_wide_mean_ms']:.4g} ms until the device was idle (the latter is reported)",
            )
        )
    if stats.get("clock_disagreement"):
        found.append(
            finding(
                "clock_disagreement",
                "warning",
                f"CUDA events ({stats['device_wide_mean_ms']:.4g} ms) and the host clock "
                f"({stats['host_mean_ms']:.4g} ms) disagree",
            )
        )
    if info.get("eager_ms") and info.get("candidate_ms"):
        speedup = info["eager_ms"] / info["candidate_ms"]
        if speedup > EXCESSIVE_SPEEDUP:
            found.append(
                finding(
                    "excessive_speedup",
                    "info",
                    f"{speedup:.1f}x faster than eager (KernelBench flags more than {EXCESSIVE_SPEEDUP:g}x)",
                )
            )
    return found


def verify(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple[torch.nn.Module, torch.nn.Module],
    device: torch.device,
    deadline: float,
    harness: Harness,
    findings: list[Finding],
) -> None:
    settings = Settings(request)
    reference, candidate = models
    if settings.strict:
        _first_call_quietly(settings, request, progress, problem, candidate, device, harness)
    progress("checking correctness")
    try:
        report = check_correctness(
            reference,
            candidate,
            problem.get_inputs,
            device,
            trials=settings.trials,
            seed=settings.seed,
            atol=settings.atol,
            rtol=settings.rtol,
            strict=settings.strict,
            inputs_on_device=settings.inputs_on_device,
            dtype=settings.dtype,
            hooks=harness.hooks() if settings.strict else None,
        )
    except ForwardError as exc:
        raise Outcome(
            "runtime_error",
            f"{exc.who}.forward raised on correctness trial {exc.trial}: {exception_summary(exc.error)}",
        ) from None
    findings.extend(report.findings)
    response["correctness"] = report.to_dict()  # type: ignore[typeddict-item]
    if not report.ok:
        if not settings.strict and device.type == "cuda":
            spread = run_or_fail(
                "Model",
                "re-run with cuDNN TF32 off",
                lambda: reference_tf32_spread(
                    reference, problem.get_inputs, device, settings.seed, settings.dtype
                ),
            )
            if spread is not None:
                response["correctness"]["reference_tf32_spread"] = spread
        raise Outcome("wrong_output", report.message)
    if settings.correctness_only:
        response["message"] = f"correct on {report.trials} trials (correctness only: not timed)"
        return

    if settings.strict:
        info = _time_strict(settings, request, progress, problem, models, device, deadline, harness)
    else:
        info = _time_kernelbench(
            settings, request, progress, problem, models, device, deadline, harness.notes
        )
    findings.extend(timing_findings(info))
    if settings.dynamic and device.type == "cuda":
        _profile_checks(request, response, progress, models, device, harness, findings, info.get("_sets"))
    info.pop("_sets", None)
    response["timing"] = info  # type: ignore[typeddict-item]
    message = f"correct on {report.trials} trials; {info['candidate_ms']:.4g} ms"
    if "eager_ms" in info:
        speedup = info["eager_ms"] / info["candidate_ms"] if info["candidate_ms"] > 0 else math.inf
        message += f" vs eager {info['eager_ms']:.4g} ms ({speedup:.2f}x)"
    cut = [k for k in ("candidate", "eager") if k in info and info[k]["trials"] < settings.perf_trials]
    if cut:
        message += f"; fewer timed calls than asked ({', '.join(cut)}) to fit the time limit"
    response["message"] = message


def _first_call_quietly(
    settings: Settings,
    request: EvalRequest,
    progress: Progress,
    problem: types.ModuleType,
    candidate: torch.nn.Module,
    device: torch.device,
    harness: Harness,
) -> None:
    """The candidate's first call, inside the machine-wide quiet window.

    A program's first call is where it times its own choices (a cuDNN algorithm search, a cuBLASLt
    heuristic timed per shape) and caches them, in process and on disk, for every later call and
    run. Timed beside another process's GPU work (a torch.compile autotuning its kernels in the
    shared window) such a search picks at random and the choice outlives the noise. What the call
    raises or returns is left to the correctness trials, which call it again.
    """
    inputs = settings.seeded_inputs(problem, device)
    progress("waiting for the timing window")
    with timing_window.quiet(request.get("cache_dir")), torch.no_grad():
        progress(FIRST_CALL_PHASE)
        try:
            harness.watched(candidate)(*inputs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except Exception:  # noqa: BLE001 - the correctness trials report it with their context
            pass
        finally:
            harness.after_call("ModelNew")


def _side_by_side(
    settings: Settings,
    request: EvalRequest,
    progress: Progress,
    contestants: list[Contestant],
    sets: list[list[Any]],
    device: torch.device,
    deadline: float,
    before_flush: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Every contestant timed in interleaved rounds inside the machine-wide quiet window."""
    progress("waiting for the timing window")
    with timing_window.quiet(request.get("cache_dir")) as waited:
        progress("timing " + " and ".join(c.name for c in contestants) + " side by side")
        budget = max(1.0, (deadline - time.monotonic()) * BUDGET_SHARE)
        try:
            info = time_in_rounds(
                contestants,
                sets,
                device,
                method="strict" if settings.strict else "kernelbench",
                warmup=settings.warmup,
                trials=settings.perf_trials,
                rounds=settings.timing_rounds,
                budget_s=budget,
                before_flush=before_flush,
            )
        except ContestantFailed as failed:
            if isinstance(failed.error, TimingCheckError):
                message = str(failed.error)
                raise Outcome(
                    "wrong_output", message, [finding("timing_output_mismatch", "error", message)]
                ) from None
            if isinstance(failed.error, Outcome):
                raise failed.error from None
            who = "ModelNew" if failed.name == "candidate" else "Model"
            raise Outcome(
                "runtime_error", f"{who}.forward raised while being timed: {exception_summary(failed.error)}"
            ) from None
    info["window_wait_s"] = round(waited, 3)
    for contestant in contestants:
        info[f"{contestant.name}_ms"] = info[contestant.name]["mean_ms"]
    return info


def _contestants(
    settings: Settings,
    candidate: Callable[..., Any],
    reference: Callable[..., Any],
    check: Any = None,
    after_call: Callable[[], None] | None = None,
) -> list[Contestant]:
    """The candidate first (every ratio is against it), then eager when the request times it."""
    timed = [Contestant("candidate", candidate, check, after_call)]
    if settings.time_reference:
        timed.append(Contestant("eager", reference))
    return timed


def _compiled_contestants(
    settings: Settings,
    request: EvalRequest,
    progress: Progress,
    reference: torch.nn.Module,
    inputs: list[Any],
    device: torch.device,
    notes: list[Finding],
) -> tuple[list[Contestant], dict[str, Any]]:
    """The requested torch.compile modes of the reference, compiled in the shared window; a mode
    that fails to compile is left out with a note (the candidate's verdict does not depend on it)."""
    timed: list[Contestant] = []
    entries: dict[str, Any] = {}
    for index, mode in enumerate(settings.compile_modes):
        progress(f"compiling the reference ({mode})")
        try:  # no reset after the first: the modes compiled before must stay compiled
            fn, entry = compile_mode(
                mode, reference, inputs, device, None, request.get("cache_dir"), reset=index == 0
            )
        except Exception as exc:
            notes.append(
                finding("compile_mode_failed", "info", f"torch.compile {mode}: {exception_summary(exc)}")
            )
            continue
        timed.append(Contestant(mode, fn))
        entries[mode] = entry
    return timed, entries


def _time_kernelbench(
    settings: Settings,
    request: EvalRequest,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple[torch.nn.Module, torch.nn.Module],
    device: torch.device,
    deadline: float,
    notes: list[Finding],
) -> dict[str, Any]:
    """KernelBench's timing: one CPU draw under the seed, same tensors every call, grad mode on
    (the compile modes, as baselines, under no_grad)."""
    reference, candidate = models
    set_seed(settings.seed)
    inputs = prepare_inputs(problem.get_inputs(), device, settings.dtype)
    timed = _contestants(settings, candidate, reference)
    compiled, entries = _compiled_contestants(settings, request, progress, reference, inputs, device, notes)
    info = _side_by_side(settings, request, progress, timed + compiled, [inputs], device, deadline)
    _add_compile_entries(info, entries)
    info["_sets"] = [inputs]
    return info


def _add_compile_entries(info: dict[str, Any], entries: dict[str, Any]) -> None:
    """compile_s (and the mode name) into each compile mode's stats; {mode: ms} under compile_ms."""
    for mode, entry in entries.items():
        info[mode].update(entry)
    if entries:
        info["compile_ms"] = {mode: info[mode]["mean_ms"] for mode in entries}


def _time_strict(
    settings: Settings,
    request: EvalRequest,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple[torch.nn.Module, torch.nn.Module],
    device: torch.device,
    deadline: float,
    harness: Harness,
) -> dict[str, Any]:
    """The strict timing: rotated input sets, every output checked, device-wide and host clocks."""
    reference, candidate = models
    progress("drawing the timing inputs")
    sets, outputs = run_or_fail(
        "Model", "drawing the timing inputs", lambda: timing_sets(settings, problem, reference, device)
    )
    check = output_check(settings, outputs, device) if outputs is not None else None
    if outputs is None:
        harness.notes.append(
            finding(
                "timing_output_check_skipped",
                "info",
                "the reference is stochastic: timed outputs not checked",
            )
        )
    timed = _contestants(
        settings, harness.watched(candidate), reference, check, lambda: harness.after_call("ModelNew")
    )
    compiled, entries = _compiled_contestants(
        settings, request, progress, reference, sets[0], device, harness.notes
    )
    timed += compiled
    info = _side_by_side(settings, request, progress, timed, sets, device, deadline, harness.before_flush)
    _add_compile_entries(info, entries)
    del outputs
    info["_sets"] = sets
    return info


def reused_reference_split(request: EvalRequest) -> dict[str, Any] | None:
    """The reference's profile split an earlier verification of this problem measured, when the
    request carries a well-formed one (the graph passes it on: the reference does not change
    between a run's candidates, and profiling it costs seconds under the device lock)."""
    split = request.get("reference_split")
    if not isinstance(split, dict) or not isinstance(split.get("device_ms"), (int, float)):
        return None
    if not isinstance(split.get("torch_ops_ms", {}), dict) or not isinstance(split.get("split_ms", {}), dict):
        return None
    return split


def _profile_checks(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    models: tuple[torch.nn.Module, torch.nn.Module],
    device: torch.device,
    harness: Harness,
    findings: list[Finding],
    sets: list[list[Any]] | None,
) -> None:
    """Profile both models once: which kernels really ran, and the operator coverage."""
    reference, candidate = models
    if not sets:
        return
    own = set(response.get("build", {}).get("kernels", []))
    progress("profiling for the hack checks")
    events = run_or_fail(
        "ModelNew",
        "profiled",
        lambda: dynamic_checks.profile_events(harness.watched(candidate), sets[0], device),
    )
    cand = dynamic_checks.classify_events(events, own, dynamic_checks.PROFILE_ITERS)
    # The same trace answers the profiler node (top kernels, own share): it then needs no worker run.
    response["profile"] = torch_profile.summarize_cuda(
        events, own, dynamic_checks.PROFILE_ITERS, torch_profile.TOP_K
    )  # type: ignore[typeddict-item]
    check_guards(harness.guards)  # not the OS-thread watch: the profiler starts threads of its own
    ref = reused_reference_split(request)
    if ref is None:
        ref = run_or_fail(
            "Model", "profiled", lambda: dynamic_checks.profile_split(reference, sets[0], device, ())
        )
    findings.extend(dynamic_checks.profile_findings(cand, own))
    response["operator_coverage"] = dynamic_checks.coverage(cand, ref)
    response["profile_split"] = {"candidate": cand, "reference": ref}  # type: ignore[typeddict-unknown-key]
