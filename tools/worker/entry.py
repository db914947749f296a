"""The isolated evaluation worker: build, check, time or profile one candidate, answer in JSON.

    python -m tools.worker --request REQ.json --response RESP.json [--progress PROGRESS.json]

Why a separate process: a candidate is code a model wrote; it may crash, hang, corrupt its CUDA
context or patch the harness. `tools.evaluate` runs this module in its own process group with a
time limit, and everything here imports only torch and the standard library so it runs on any CUDA
box. The candidate's prints are moved to stderr, so stdout stays free for the answer when no
--response file is given. --progress names a file that always holds the current phase and the
partial answer, which is what the parent reports when it has to kill us.

Rules: seeded construction of Model and ModelNew (KernelBench's), precision switches guarded, then
one of two modes (tools.worker.correctness and tools.worker.timing say why):
- kernelbench: KernelBench's exact methodology (5 trials, reference first on the same tensors,
  allclose by precision; mean of cold-L2 CUDA-event timings) and its process state: sources exec'd
  into one dict as its scripts do, PyTorch's precision defaults left on (tools.worker.kernelbench_state);
- strict: TF32 pinned off, cloned and rotated inputs, both call orders, poisoned free memory, a float64 check, a
  sign-randomised trial, every timed output checked, device-wide and host clocks, and the dynamic
  hack checks (tools.worker.dynamic_checks) whose findings the response carries under "findings".
Only the measuring part holds the device lock; builds run in parallel across workers.

This module reads the request, runs the action (tools.worker.verify, tools.worker.profile_action,
tools.worker.tune, or only the import for "build") and writes the answer; the steps live in their
own modules.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from tools.build import (
    build_records,
    clear_build_records,
    default_cache_dir,
    install_cached_load_inline,
    parse_arch,
)
from tools.process import write_atomic
from tools.protocol import EvalRequest, EvalResponse, Finding, json_safe, merge
from tools.worker import dynamic_checks, gpu_lock, timing_window
from tools.worker.guards import check_guards, pin_precision, snapshot_guards
from tools.worker.harness import Harness, Settings
from tools.worker.inputs import host_draw_budget, predrawn, trial_seeds
from tools.worker.kernelbench_state import (
    KernelBenchLoad,
    construct_candidate,
    construct_reference,
    exec_candidate,
    load_reference,
)
from tools.worker.loading import (
    build_info,
    construct,
    construct_on_host,
    import_candidate,
    load_problem,
    raise_for_failed_build,
)
from tools.worker.profile_action import profile
from tools.worker.reporting import Outcome, Progress, exception_summary
from tools.worker.tune import tune
from tools.worker.verify import verify

DEFAULT_ARCH = "sm_90"  # the project's target (H100/H200) when neither the request nor a GPU says


def _default_arch() -> str:
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    return DEFAULT_ARCH


def _run(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    started: float,
    findings: list[Finding],
) -> None:
    action = request.get("action", "verify")
    if action not in ("verify", "profile", "build", "tune"):
        raise Outcome(
            "runtime_error", f"bad request: unknown action {action!r} (verify, profile, build or tune)"
        )
    device_kind = request.get("device", "cuda")
    if device_kind not in ("cuda", "cpu"):
        raise Outcome("runtime_error", f"bad request: unknown device {device_kind!r} (cuda or cpu)")
    settings = Settings(request)  # validates mode and precision before anything is built
    if "deadline" in request:  # the parent's kill time, in this process's monotonic clock
        deadline = time.monotonic() + float(request["deadline"]) - time.time()
    else:
        deadline = started + float(request.get("timeout_s", 600.0))
    cache_dir = Path(request.get("cache_dir") or default_cache_dir())
    arch = request.get("arch") or _default_arch()
    try:
        parse_arch(arch)
    except ValueError as exc:  # a bad arch is a bad request, not a build error
        raise Outcome("runtime_error", f"bad request: {exc}") from None
    install_cached_load_inline(
        arch, cache_dir, on_start=lambda name: progress(f"building extension '{name}'")
    )

    # kernelbench mode keeps KernelBench's process state (tools.worker.kernelbench_state); strict pins TF32 off.
    kernelbench = settings.mode == "kernelbench" and action != "build"
    problem: Any = None
    load: KernelBenchLoad | None = None
    if action != "build":
        progress("loading the problem")
        if kernelbench:
            load = load_reference(request)
            problem = load.problem
        else:
            problem = load_problem(request)
    if not kernelbench:
        pin_precision()
    guards = snapshot_guards()
    watch = dynamic_checks.Watch()
    l2_baseline = None
    on_gpu = action != "build" and device_kind == "cuda" and torch.cuda.is_available()
    # GPU set-up before the device lock (this process's CUDA context, KernelBench's reference built on
    # the device) maps GPU memory, which slows a memory-bound kernel that another process is timing: it
    # waits, as builds do, while a timing holds the machine's quiet window.
    with timing_window.busy(cache_dir) if on_gpu else contextlib.nullcontext():
        if on_gpu:
            l2_baseline = dynamic_checks.persisting_l2_limit()  # before the program can touch it
        if load is not None:
            construct_reference(
                load, torch.device(device_kind if on_gpu else "cpu"), settings.seed, settings.dtype
            )
    progress("importing the candidate")
    if load is not None:
        candidate: Any = exec_candidate(request, response, load, str(cache_dir / "torch_extensions"))
    else:
        candidate = import_candidate(request, response)
    built = response.get("build", {})
    if action == "build":
        response["message"] = (
            f"built {len(built.get('extensions', []))} extension(s) in {built.get('seconds', 0.0):.1f} s"
            + (" (cache hit)" if built.get("cached") else "")
        )
        return
    if device_kind == "cuda" and not torch.cuda.is_available():
        raise Outcome(
            "no_gpu", "built, but there is no CUDA device here to run it (torch.cuda.is_available() is False)"
        )
    device = torch.device(device_kind)
    if device.type == "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    response["device"] = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    assert problem is not None
    check_guards(guards)  # import-time patches
    if load is not None and action == "verify" and device.type == "cuda":
        progress("drawing the trials' inputs on the CPU")  # as KernelBench does, before taking the GPU
        seeds = trial_seeds(settings.trials, settings.seed)
        load.problem.get_inputs = predrawn(load.problem.get_inputs, seeds, host_draw_budget())
    on_host = None
    if load is None:
        progress("constructing the models on the CPU")  # before the lock: weight init takes seconds
        on_host = construct_on_host(problem, candidate, settings.seed, settings.dtype, watch)
    progress("waiting for the device lock")
    with gpu_lock.exclusive(gpu_lock.lock_path(cache_dir, device)):
        progress("constructing the models")
        if load is not None:
            models = construct_candidate(
                load, candidate, device, settings.seed, settings.dtype, watch.running()
            )
        else:
            models = construct(problem, candidate, device, settings.seed, settings.dtype, watch, on_host)
        check_guards(guards)
        if not kernelbench:
            pin_precision()
        harness = Harness(guards, watch, device, l2_baseline)
        try:
            if action == "verify":
                verify(request, response, progress, problem, models, device, deadline, harness, findings)
            elif action == "tune":
                namespace = load.context if load is not None else vars(candidate)
                tune(request, response, progress, problem, namespace, models, device, deadline)
            else:
                profile(request, response, progress, problem, models, device)
        finally:
            findings.extend(watch.findings())
            if harness.l2 is not None:
                findings.extend(harness.l2.findings())
            findings.extend(harness.notes)
            del models
            free_device_memory(device)
        check_guards(guards)


def free_device_memory(device: torch.device) -> None:
    """Give the run's cached GPU memory back while the device lock is still held: unmapping gigabytes
    slows a memory-bound kernel that another process is timing, and exiting would free it after the lock."""
    if device.type != "cuda":
        return
    gc.collect()
    with contextlib.suppress(RuntimeError):  # a broken context (the program's fault) keeps its memory
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def run_request(request: EvalRequest, progress_path: str | None = None) -> EvalResponse:
    """Answer one request; never raises (harness failures become runtime_error with 'worker error')."""
    started = time.monotonic()
    response: EvalResponse = {"status": "passed", "message": "", "device": ""}
    progress = Progress(progress_path, response)
    progress("starting")
    clear_build_records()
    outcome = Outcome("passed", "")
    findings: list[Finding] = []
    try:
        _run(request, response, progress, started, findings)
    except Outcome as stopped:
        outcome = stopped
    except Exception as exc:
        outcome = Outcome("runtime_error", f"worker error: {exception_summary(exc)}")
    if build_records():  # builds may also happen lazily, in ModelNew() or forward
        response["build"] = build_info(build_records())
        try:
            raise_for_failed_build()
        except Outcome as failed_build:
            outcome = failed_build
    if outcome.status != "passed":
        response["status"] = outcome.status  # type: ignore[typeddict-item]
        response["message"] = outcome.message
    all_findings = merge(response.get("findings", []), findings, outcome.findings)
    if all_findings or request.get("mode") == "strict":
        response["findings"] = all_findings  # type: ignore[typeddict-item]
    last_phase = response.get("phase", "")
    progress("done")  # closes the last phase's timing
    response["phase"] = "done" if response["status"] == "passed" else last_phase
    response["seconds"] = round(time.monotonic() - started, 3)
    return json_safe(response)


def _read_request(path: str | None) -> tuple[EvalRequest | None, str]:
    try:
        text = Path(path).read_text() if path else sys.stdin.read()
        request = json.loads(text)
    except (OSError, ValueError) as exc:
        return None, f"bad request: cannot read it as JSON ({exc})"
    if not isinstance(request, dict):
        return None, "bad request: expected a JSON object"
    return request, ""  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.worker", description=__doc__.split("\n")[0])
    parser.add_argument("--request", help="request JSON file (default: stdin)")
    parser.add_argument("--response", help="response JSON file (default: stdout)")
    parser.add_argument("--progress", help="file kept holding the current phase and partial response")
    args = parser.parse_args(argv)
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # the candidate's prints (Python and C) go to stderr, never into the answer
    request, problem = _read_request(args.request)
    if request is None:
        response: EvalResponse = {"status": "runtime_error", "message": problem, "seconds": 0.0}
    else:
        response = run_request(request, args.progress)
    text = json.dumps(response, allow_nan=False)
    if args.response:
        write_atomic(args.response, text)
    else:
        os.write(answer_fd, text.encode() + b"\n")
    return 0
