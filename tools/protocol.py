"""The JSON protocol between the graph and the evaluation worker.

The worker (`python -m tools.worker --request REQ.json --response RESP.json`) reads one request
object as JSON (from stdin without --request) and writes one response object as JSON (to stdout
without --response). Both sides import only this module and the standard library for the wire
format, so the worker runs on any CUDA box with torch, and a remote or distributed worker can speak
the same protocol. A `Finding` is a wire type too: the worker's dynamic checks and the parent's static
checks (tools.checks) speak it, and `merge` joins their lists.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal, TypedDict, cast

Action = Literal["verify", "profile", "build", "tune"]
"""verify: build, check correctness, time (candidate and eager reference);
profile: build, run the candidate (and optionally the reference) under the profiler;
build: only build the candidate's extensions (works without a GPU);
tune: search the candidate's launch knobs, side by side (tools.worker.tune, docs/autotuning.md)."""

Status = Literal["passed", "build_error", "runtime_error", "timeout", "wrong_output", "no_gpu", "crashed"]
"""passed: built, correct on every trial (and timed); build_error: a compiler or linker failed;
runtime_error: import, construction or forward raised (CUDA errors included); timeout: the wall-time
limit ran out; wrong_output: ran but disagreed with the reference; no_gpu: built, but there is no
CUDA device to run it; crashed: the worker died without answering (segfault, OOM kill)."""

STATUSES: tuple[str, ...] = (
    "passed",
    "build_error",
    "runtime_error",
    "timeout",
    "wrong_output",
    "no_gpu",
    "crashed",
)


class EvalRequest(TypedDict, total=False):
    action: Action
    problem_name: str
    problem_source: str  # the reference program (KernelBench format)
    candidate_source: str  # the program defining ModelNew
    device: Literal["cuda", "cpu"]
    arch: str  # e.g. "sm_90"
    mode: Literal["kernelbench", "strict"]  # default kernelbench (tools.worker.correctness, .timing)
    correctness_trials: int  # default 5
    perf_trials: int  # default 100
    warmup: int  # default 3
    time_reference: bool  # also time the eager reference in the same run (default True)
    timing_rounds: int  # contestants interleaved in this many rounds (default 10, tools.worker.rounds)
    compile_modes: list[str]  # torch.compile modes of the reference, timed in the same rounds
    correctness_only: bool  # stop after the correctness trials (the KernelBench cross-check), default False
    profile_reference: bool  # action=profile: profile the reference too (default False)
    cache_dir: str  # build cache root (default: tools.build.default_cache_dir())
    timeout_s: float  # enforced by the parent; the worker uses it for its own budgeting
    deadline: float  # set by tools.evaluate: the time.time() at which the parent kills the worker
    seed: int  # default 42
    inputs_on_device: (
        bool  # draw get_inputs() directly on the GPU (default False: on the CPU, as KernelBench)
    )
    atol: float  # correctness tolerance, default by precision (KernelBench: fp32 1e-4, fp16/bf16 1e-2)
    rtol: float  # default by precision, as atol
    precision: Literal["fp32", "fp16", "bf16"]  # models and floating inputs cast to it (default fp32)
    sol_ms: float  # a physical floor (ms: peak rates, compulsory reads); faster calls: impossible_speed
    work_flops: int  # the problem's FLOPs and compulsory bytes (the planner's fx analysis): without sol_ms,
    work_bytes: int  # tools.evaluate derives the floor from them and the GPU's ceilings (tools.roofline)
    timing_input_sets: int  # strict: input sets rotated over timed calls (default 4, fewer if memory is low)
    dynamic_checks: bool  # profile-based hack checks and operator coverage (default: on in strict mode)
    reference_split: dict[str, Any]  # the reference's profile split from an earlier verification of the same
    # problem (the response's profile_split["reference"]): reused instead of profiling the reference again
    tune_budget_s: float  # action=tune: seconds the launch-knob search may take (default 10)
    tune_skip: list[list[str]]  # action=tune: [group, knob] pairs an earlier search went through


class BuildInfo(TypedDict, total=False):
    ok: bool
    seconds: float  # all the program's builds together (a cache hit is an import: well under 1 s)
    cached: bool  # every build was a cache hit
    errors: list[str]  # the compiler's first errors, file:line kept ("cuda_sources(12): error: ...")
    log_tail: str
    extensions: list[str]  # module names built or loaded, f"{name}_{key[:12]}"
    kernels: list[str]  # __global__ function names in the program's CUDA sources


class CorrectnessInfo(TypedDict, total=False):
    trials: int
    passed: int
    max_abs_err: float
    max_rel_err: float
    where: str  # index of the worst element, e.g. "[3, 17]"
    mode: str  # "kernelbench" or "strict"
    norm_err: float | None  # strict: worst ||out - ref64|| / ||ref64|| against the float64 reference
    norm_allowed: float | None  # strict: the limit that applied (max(0.1 x tolerance, 16 x PyTorch's own))
    ref_norm_err: float | None  # strict: the fp32 reference's own normalised error
    reference_tf32_spread: (
        float  # kernelbench, on failure: the reference's own move between cuDNN TF32 on and off
    )
    signed_trial: str  # strict: the extra sign-randomised trial: "passed", "failed" or "skipped: why"


class TimingStats(TypedDict, total=False):
    mean_ms: float
    median_ms: float
    std_ms: float
    cv: float  # coefficient of variation: std / mean
    min_ms: float
    max_ms: float
    trials: int
    method: str  # "kernelbench" or "strict"
    stream_mean_ms: float  # strict: events on the current stream only
    device_wide_mean_ms: float  # strict: end event recorded after a device-wide synchronize
    host_mean_ms: float  # strict: host clock around the call and the synchronize
    off_stream: bool  # strict: work escaped the current stream (the headline is then device-wide)
    off_stream_gap_ms: float  # strict: median device-wide minus stream time, net of the sync latency
    sync_latency_median_ms: float  # strict: an idle synchronize-then-record round trip (host wake-up)
    clock_disagreement: bool  # strict: events and the host clock disagree
    input_sets: int  # strict: input sets rotated across the timed calls
    cuda_mallocs: int  # strict: allocator segments created inside the counted calls
    issue_mean_ms: float  # strict: host time from the start event to the call's return (GPU idle before it)
    issue_median_ms: float  # strict: the same, the median call (the mean carries rare slow ones)
    rounds: int  # interleaved rounds this contestant's calls were spread over (tools.worker.rounds)
    round_means_ms: list[float]


class RatioStats(TypedDict, total=False):
    median: float  # of the per-round ratio other / candidate
    mean: float
    cv: float
    rounds: int


class TimingInfo(TypedDict, total=False):
    candidate_ms: float  # the headline number (mean, KernelBench methodology)
    eager_ms: float
    candidate: TimingStats
    eager: TimingStats
    order: list[str]  # the timed blocks as they ran: candidate, eager, candidate, eager ...
    rounds: int
    ratios: dict[str, RatioStats]  # "eager": eager / candidate per round (the side-by-side speedup)
    window_wait_s: float  # waited for the machine-wide quiet window (tools.worker.timing_window)
    compile_ms: dict[str, float]  # the request's compile modes: {mode: mean ms}; stats under each mode


class KernelRecord(TypedDict):
    name: str
    calls: int
    total_ms: float
    share: float


class ProfileInfo(TypedDict, total=False):
    source: str  # "torch_profiler"
    events: Literal["cuda_kernels", "cpu_ops"]  # what was summarised (cpu_ops on a CPU-only run)
    device_ms: float  # device time per forward
    kernel_count: int  # launches per forward
    own_kernel_share: float  # share of device time in kernels the candidate compiled itself
    top: list[KernelRecord]
    reference: dict[str, Any]  # the same fields for the reference, when asked


SEVERITIES: tuple[str, ...] = ("info", "warning", "error")
"""info: context that does not change the verdict; warning: a reviewer must look; error: a cheat."""


class Finding(TypedDict):
    """One named observation about a program, static (tools.checks) or dynamic (the worker)."""

    id: str  # e.g. "off_stream_work", "pytorch_fallback" (tools.checks lists the static ones)
    severity: Literal["info", "warning", "error"]
    evidence: str


WAIT_PHASE = "waiting for"  # the phases (EvalResponse.phases) that are waiting: device lock, quiet window
FIRST_CALL_PHASE = "first call, the program's own searches"  # strict verify: a timing (its searches)


def phase_seconds(phases: dict[str, float] | None, prefixes: tuple[str, ...]) -> float:
    """Seconds of a worker run's phases (EvalResponse.phases) whose names start with one of `prefixes`."""
    return sum(float(s or 0.0) for phase, s in (phases or {}).items() if str(phase).startswith(prefixes))


def waited_seconds(response: EvalResponse) -> float:
    """Seconds a worker run spent waiting (for the device lock, the quiet window), not working."""
    return phase_seconds(response.get("phases"), (WAIT_PHASE,))


def finding(id_: str, severity: str, evidence: str) -> Finding:
    """One named finding (severity is info, warning or error)."""
    if severity not in SEVERITIES:
        raise ValueError(f"unknown severity {severity!r}")
    return cast(Finding, {"id": id_, "severity": severity, "evidence": evidence})


def merge(*groups: Iterable[Finding]) -> list[Finding]:
    """Concatenate finding lists, dropping exact duplicates (same id, severity and evidence)."""
    seen: set[tuple[str, str, str]] = set()
    merged: list[Finding] = []
    for group in groups:
        for item in group:
            key = (item.get("id", ""), item.get("severity", ""), item.get("evidence", ""))
            if key not in seen:
                seen.add(key)
                merged.append(cast(Finding, dict(item)))
    return merged


class EvalResponse(TypedDict, total=False):
    status: Status
    message: str  # one or a few lines: the reason for the status
    device: str  # e.g. "NVIDIA H200" or "cpu"
    build: BuildInfo
    correctness: CorrectnessInfo
    timing: TimingInfo
    profile: ProfileInfo
    seconds: float  # wall time of the worker run
    phases: dict[
        str, float
    ]  # seconds spent in each phase (building, waiting for the device lock, timing ...)
    stdout_tail: str  # what the candidate printed (capped)
    phase: str  # what the worker was doing when it stopped (always set for timeout and crashed)
    findings: list[Finding]  # dynamic hack checks (strict mode; static ones: tools.checks.static_findings)
    operator_coverage: float | None  # share of the reference's GPU time no longer in PyTorch compute ops
    profile_split: dict[str, Any]  # dynamic checks: device ms per class (own, library, direct, torch, data)
    tune: dict[
        str, Any
    ]  # action=tune: launch (the changed knobs), table, trials, speedup (tools.worker.tune)


def json_safe(value: Any) -> Any:
    """Strict JSON: non-finite floats become None, in nested dicts and lists too (messages say why)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value
