"""The parent side of the evaluation worker: run one request in a fresh, killable process.

Why: the graph must survive whatever a candidate does. The worker runs as `python -m tools.worker`
in a new session (its own process group, so the compiler and anything the candidate spawns die with
it), with a private temp directory as TMPDIR and TORCH_EXTENSIONS_DIR, and under a wall-time
limit, inside the sandbox (tools.sandbox: an allowlisted environment, no network, a filesystem
policy, rlimits; what it refuses comes back as `sandbox_violation` findings). Its stdout and stderr
are drained by a thread into a capped log (the head on disk, the tail in memory), so a candidate printing in a loop costs neither memory nor disk. Candidate failures of
every kind come back as a status; `evaluate` itself never raises for them.

The worker reports what it measured; judging a time against the physical floor (`impossible_speed`,
from tools.roofline) happens here, so the worker island needs nothing beyond torch. `prebuild` runs
several build-only requests at once. Standard library only (as are tools.process, tools.protocol,
tools.roofline and tools.sandbox).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.process import (
    CappedLog,
    available_cpus,
    drain,
    read_json,
    signal_name,
    wait_then_kill_group,
)
from tools.protocol import EvalRequest, EvalResponse, Finding, finding
from tools.roofline import work_floor_ms
from tools.sandbox import Sandbox, SandboxSettings
from tools.worker import timing_window

DEFAULT_TIMEOUT_S = 600.0
SOL_SLACK = 0.05  # a timed call may not beat the speed-of-light floor by more than this share
SOL_SLACK_MS = 0.002  # ... plus the CUDA events' resolution


def _worker_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmp)
    env["TORCH_EXTENSIONS_DIR"] = str(tmp / "torch_extensions")
    env["PYTHONFAULTHANDLER"] = "1"  # a segfault leaves a Python traceback in the log
    env["PYTHONUNBUFFERED"] = "1"  # prints reach the log even when the worker is killed
    return env


def evaluate(
    request: EvalRequest,
    timeout_s: float | None = None,
    *,
    python: str = sys.executable,
    log_path: str | os.PathLike[str] | None = None,
    sandbox: str | None = None,
) -> EvalResponse:
    """Run the worker on `request` and return its response (status timeout or crashed if it had none).

    timeout_s: wall-time limit for the whole worker run, start-up and build included (default:
    request["timeout_s"], else 600). log_path: keep the worker's capped output log there.
    sandbox: auto, required or off (default $STITCHCUDA_SANDBOX, else auto); raises SandboxError
    when `required` meets a platform without every layer.
    """
    limit = float(timeout_s if timeout_s is not None else request.get("timeout_s", DEFAULT_TIMEOUT_S))
    request = EvalRequest(**request)
    request["timeout_s"] = limit
    request["deadline"] = time.time() + limit  # the worker budgets its timing loop against it
    settings = SandboxSettings.resolve(sandbox, device=request.get("device", "cuda"), timeout_s=limit)
    tmp = Path(tempfile.mkdtemp(prefix="stitch-eval-"))
    try:
        caches = [request["cache_dir"]] if request.get("cache_dir") else []
        box = Sandbox(tmp, settings, caches=caches, writable=timing_window.sandbox_paths())
        with box:
            response = _evaluate_in(tmp, request, limit, python, Path(log_path) if log_path else None, box)
        return box.annotate(response)  # type: ignore[arg-type,return-value]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _evaluate_in(
    tmp: Path, request: EvalRequest, limit: float, python: str, keep_log: Path | None, box: Sandbox
) -> EvalResponse:
    request_path, response_path, progress_path = (
        tmp / "request.json",
        tmp / "response.json",
        tmp / "progress.json",
    )
    request_path.write_text(json.dumps(request))
    work = tmp / "work"
    work.mkdir()
    log = CappedLog(tmp / "worker.log")
    command = [
        python,
        "-m",
        "tools.worker",
        "--request",
        str(request_path),
        "--response",
        str(response_path),
        "--progress",
        str(progress_path),
    ]
    started = time.monotonic()
    try:
        proc = box.popen(
            command,
            cwd=work,
            env=_worker_env(work),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except OSError as exc:
        log.close()
        message = f"cannot start the worker ({python}): {exc}"
        return EvalResponse(status="crashed", message=message, phase="starting the worker", seconds=0.0)
    assert proc.stdout is not None
    drain_thread = threading.Thread(target=drain, args=(proc.stdout, log), daemon=True)
    drain_thread.start()
    try:
        timed_out = wait_then_kill_group(proc, limit)  # also ends whatever the candidate left running
    finally:
        drain_thread.join(timeout=5)
        proc.stdout.close()
        log.close()
    seconds = round(time.monotonic() - started, 3)
    if keep_log is not None:
        keep_log.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log.path, keep_log)

    progress = read_json(progress_path) or {}
    partial: dict[str, Any] = dict(progress.get("response") or {})
    phase = str(progress.get("phase") or "starting the worker")
    response = None if timed_out else read_json(response_path)
    if timed_out:
        response = {**partial, "status": "timeout", "message": f"timed out after {limit:g} s while {phase}"}
    elif response is None:
        if proc.returncode < 0:
            how = f"died with {signal_name(proc.returncode)}"
        else:
            how = f"exited with code {proc.returncode} without an answer"
        last = [line for line in log.tail_text(1500).splitlines() if line.strip()][-12:]
        response = {
            **partial,
            "status": "crashed",
            "message": "\n".join([f"the worker {how} while {phase}", *last]),
        }
    response["phase"] = response.get("phase") or phase
    response["seconds"] = seconds
    response["stdout_tail"] = log.tail_text()
    impossible = speed_of_light_findings(request, response)  # type: ignore[arg-type]
    if impossible:
        response["findings"] = [*response.get("findings", []), *impossible]
    return response  # type: ignore[return-value]


def speed_of_light_findings(request: EvalRequest, response: EvalResponse) -> list[Finding]:
    """`impossible_speed` when the fastest timed call beat the physical floor of the request's work.

    The floor is the request's sol_ms, else the one tools.roofline derives from its work figures and
    the response's GPU. Judged here, on the parent side, so the worker needs no roofline.
    """
    stats = response.get("timing", {}).get("candidate")
    if not stats or "min_ms" not in stats:
        return []
    sol_ms = float(request["sol_ms"]) if request.get("sol_ms") else None
    if sol_ms is None:
        work = (int(request.get("work_flops") or 0), int(request.get("work_bytes") or 0))
        sol_ms = work_floor_ms(work, response.get("device") or "cpu")
    if not sol_ms or stats["min_ms"] >= sol_ms * (1.0 - SOL_SLACK) - SOL_SLACK_MS:
        return []
    evidence = (
        f"a timed call took {stats['min_ms']:.4g} ms, below the speed-of-light floor of "
        f"{sol_ms:.4g} ms: the work did not happen inside the timed window"
    )
    return [finding("impossible_speed", "error", evidence)]


def prebuild(
    candidate_sources: Sequence[str],
    *,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    timeout_s: float = 600.0,
) -> list[EvalResponse]:
    """Build independent candidates' extensions at once, each in its own worker (action "build").

    Why: compiling is CPU work and candidates are untrusted code, so each one is executed in its own
    killable worker process; with the cache filled, their later verification only imports. Returns the
    workers' responses in input order (status "passed" when every extension built). cache_dir: the
    build cache (default: the worker's, tools.build.default_cache_dir()).
    """
    workers = max(1, jobs or min(len(candidate_sources), available_cpus()))

    def one(source: str) -> EvalResponse:
        request = EvalRequest(action="build", candidate_source=source)
        if cache_dir:
            request["cache_dir"] = str(cache_dir)
        if arch:
            request["arch"] = arch
        return evaluate(request, timeout_s=timeout_s)

    if not candidate_sources:
        return []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, candidate_sources))
