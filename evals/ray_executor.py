"""The Ray executor of `stitchcuda eval`: each problem a Ray task that needs one GPU.

Why: a user with a cluster (or an RL loop that needs thousands of evaluations) already runs Ray;
spreading the suite over its GPUs and nodes needs no scheduler of ours. Each task runs exactly what
the local executor runs for one problem (evals.runner.run_one: the CLI run in its own process, then
the baselines) on the GPU Ray gave it (Ray sets CUDA_VISIBLE_DEVICES, which the run inherits), and
returns the record; the driver appends each record to OUT/results.jsonl as its task finishes, so
resume works as it does locally: what is recorded is skipped, the rest runs.

Failures: a task whose worker or node dies is retried by Ray on a fresh worker (`max_retries`,
system failures only); a problem's own failure is a record, not an exception, so it is never
retried. A GPU fault inside a candidate (a kernel that corrupts its CUDA context) happens in that
evaluation's worker process (tools.evaluate), which reports runtime_error or crashed, and the
graph's next evaluation runs in a fresh process. When a run's last evaluation ended that way (or
the run gave no report), the task probes its GPU in a fresh process (evals.gpu_health). A failed
probe drops that GPU for the rest of the eval: the first task Ray places on it afterwards holds it
(so nothing else lands there) and hands its problem back; the faulted problem's run folder is set
aside and the problem runs again on another GPU (`gpu_fault_retries` times), its record written
once; OUT/gpu_health.jsonl and the summary say which GPU was dropped and why. A passing probe
leaves the record as the problem's own failure. The driver learns from a small actor (the Board)
which problems have started (the progress bar's "in flight") and which GPUs are dropped.

A problem whose retries all fail, or whose task raised, gets no record (the next invocation with
the same OUT runs it again) and is named on stderr. Without an address a local Ray instance is
started (`num_gpus` declares its GPUs: logical ones on a machine without any, as the tests do).
"""

from __future__ import annotations

import itertools
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evals import gpu_health
from evals.runner import DEFAULT_CLI, REPO, BaselineConfig, SuiteProblem, run_one, runs_on_cuda, where_it_ran

DEFAULT_RETRIES = 3
DEFAULT_GPU_FAULT_RETRIES = 1  # a problem that breaks a second GPU too is kept as its own failure
POLL_S = 0.5  # how often the driver reads the Board while no task finishes
# The driver's settings that shape every run, shipped to the workers of every node (`--sandbox` sets
# STITCHCUDA_SANDBOX for the baselines and profilers; the eval command of docs/benchmarks.md sets
# STITCHCUDA_PROFILERS). Paths of the machine's own (build cache, timing window) are left to each node.
SHIPPED_SETTINGS = ("STITCHCUDA_SANDBOX", "STITCHCUDA_PROFILERS")


@dataclass(frozen=True)
class RayOptions:
    """Where and how the tasks run."""

    address: str | None = None  # "auto", "ray://host:10001", "host:6379"; None: a local instance
    num_gpus: int | None = None  # local instance only: GPUs to declare (default: Ray detects them)
    gpus_per_task: float = 1.0
    max_retries: int = DEFAULT_RETRIES
    # The GPU health probe: None runs tools.worker.probe after suspect CUDA runs; a command (the
    # tests' stand-in) runs after every suspect run, whatever the device.
    health_probe: tuple[str, ...] | None = None
    gpu_fault_retries: int = DEFAULT_GPU_FAULT_RETRIES

    def run(
        self,
        problems: Sequence[SuiteProblem],
        out: Path,
        run_args: Sequence[str],
        timeout_s: float,
        baseline: BaselineConfig | None,
        cli: Sequence[str],
        on_start: Callable[[SuiteProblem], None] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """What evals.runner.run_suite calls (so the runner never imports this module)."""
        return run_on_ray(problems, out, run_args, timeout_s, baseline, cli, self, on_start)


@dataclass(frozen=True)
class Job:
    """One submission of a problem: a fault retry or a handed-back problem is a new one."""

    key: str
    submission: int
    fault_round: int = 0  # how many GPUs this problem has already been taken off
    may_retry: bool = True  # a failed probe sets the run aside for a retry (else the record stays)


class Board:
    """A Ray actor the tasks report to and the driver reads: problems started, GPUs dropped, problems
    handed back by the tasks that hold a dropped GPU, and when those may let go."""

    def __init__(self) -> None:
        self._started: list[str] = []
        self._bounced: list[int] = []
        self._dropped: set[str] = set()
        self._released = False

    def started(self, key: str) -> None:
        self._started.append(key)

    def drop(self, node: str, gpus: list[str]) -> None:
        self._dropped.update(f"{node}/{gpu}" for gpu in gpus)

    def dropped_here(self, node: str, gpus: list[str]) -> bool:
        return any(f"{node}/{gpu}" in self._dropped for gpu in gpus)

    def bounce(self, submission: int) -> None:
        self._bounced.append(submission)

    def news(self) -> tuple[list[str], list[int]]:
        """(problems started, submissions handed back) since the last call."""
        news = (self._started, self._bounced)
        self._started, self._bounced = [], []
        return news

    def release(self) -> None:
        self._released = True

    def released(self) -> bool:
        return self._released


def shipped(
    problems: Sequence[SuiteProblem], out: Path, cli: Sequence[str]
) -> tuple[list[SuiteProblem], Path, list[str] | None]:
    """What the driver hands each task: absolute paths (a node's Ray worker does not start in the
    driver's folder), and None for the default CLI, which each node resolves to its own interpreter
    (the driver's `sys.executable` need not exist there)."""
    resolved = [replace(problem, path=problem.path.resolve()) for problem in problems]
    return resolved, out.resolve(), None if tuple(cli) == DEFAULT_CLI else list(cli)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RuntimeError('the Ray executor needs Ray: pip install -e ".[ray]"') from None
    return ray


def connect(options: RayOptions) -> bool:
    """Join the cluster at options.address, else start a local instance; True when we started it."""
    ray = _ray()
    if ray.is_initialized():
        return False
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))}
    env |= {name: os.environ[name] for name in SHIPPED_SETTINGS if name in os.environ}
    if options.address:
        ray.init(address=options.address, runtime_env={"env_vars": env}, log_to_driver=False)
    else:
        ray.init(
            num_gpus=options.num_gpus,
            runtime_env={"env_vars": env},
            include_dashboard=False,
            log_to_driver=False,
        )
    return True


def _hold(ray: Any, board: Any, job: Job) -> dict[str, Any]:
    """This task landed on a dropped GPU: hand the problem back and keep the GPU until the eval ends."""
    ray.get(board.bounce.remote(job.submission))
    while not ray.get(board.released.remote()):
        time.sleep(POLL_S)
    return {"bounced": job.submission}


def _check_gpu(
    ray: Any, board: Any, record: dict[str, Any], probe: Sequence[str] | None, node: str, gpus: list[str]
) -> dict[str, Any] | None:
    """Probe this task's GPU after a suspect run; the fault (the GPU now dropped) when it failed."""
    status = gpu_health.suspect(record)
    if status is None:
        return None
    result = gpu_health.run_probe(probe)
    record["gpu_probe"] = {
        "ok": result.ok,
        "seconds": result.seconds,
        **({"note": result.reason} if result.reason else {}),
    }
    if result.ok:
        return None
    failed = [gpus[i] for i in result.failed_indices(len(gpus)) if i < len(gpus)] or gpus
    ray.get(board.drop.remote(node, failed))  # before this task ends: the next task here will see it
    uuids = [str(d["uuid"]) for d in result.devices if not d.get("ok") and d.get("uuid")]
    return {
        "problem": record["problem"],
        "status": status,
        "reason": result.reason,
        "node": socket.gethostname(),
        "ray_node_id": node,
        "gpu": ",".join(failed),
        "uuid": ",".join(uuids) or None,
        "at": round(time.time(), 1),
    }


def _run_on_node(
    problem: SuiteProblem,
    out: Path,
    run_args: Sequence[str],
    timeout_s: float,
    baseline: BaselineConfig | None,
    cli: Sequence[str] | None,
    board: Any,
    job: Job,
    probe: Sequence[str] | None,
) -> dict[str, Any]:
    """The task body: the local executor's run_one, plus where Ray placed it and the GPU's health."""
    ray = _ray()
    node = ray.get_runtime_context().get_node_id()
    gpus = [str(g) for g in ray.get_gpu_ids()]
    if ray.get(board.dropped_here.remote(node, gpus)):
        return _hold(ray, board, job)
    ray.get(board.started.remote(problem.key))
    record = run_one(problem, out, run_args, timeout_s, baseline, cli or DEFAULT_CLI, executor="ray")
    placed = where_it_ran("ray")
    record.update(placed)
    record["ray_node_id"] = node
    record["gpu"] = ",".join(gpus) or placed["gpu"]
    if probe is not None or runs_on_cuda(run_args):
        fault = _check_gpu(ray, board, record, probe, node, gpus)
        if fault is not None:
            if job.may_retry:
                fault["set_aside"] = gpu_health.set_aside(out, problem.key, job.fault_round + 1)
            record["gpu_fault"] = fault
    return record


def _why_lost(ray: Any, exc: BaseException, retries: int) -> str:
    """One line for stderr: what happened to a task that returned no record."""
    if isinstance(exc, ray.exceptions.RayTaskError):  # the task body raised: Ray does not retry that
        cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
        lines = str(cause).strip().splitlines()
        how = f"raised {type(cause).__name__}: {lines[-1] if lines else ''}".rstrip(": ")
    else:
        lines = str(exc).strip().splitlines()
        how = f"lost after {retries} retries ({lines[0] if lines else type(exc).__name__})"
    return f"{how}; not recorded, so the next eval with this --out runs it again"


def _say(line: str) -> None:
    print(f"stitchcuda: {line}", file=sys.stderr, flush=True)


def run_on_ray(
    problems: Sequence[SuiteProblem],
    out: Path,
    run_args: Sequence[str],
    timeout_s: float,
    baseline: BaselineConfig | None,
    cli: Sequence[str],
    options: RayOptions,
    on_start: Callable[[SuiteProblem], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield each problem's record as its task finishes (in completion order)."""
    if not problems:
        return
    ray = _ray()
    started_here = connect(options)
    board = None
    holders: list[Any] = []
    try:
        board = ray.remote(num_cpus=0)(Board).remote()
        task = ray.remote(num_gpus=options.gpus_per_task, max_retries=options.max_retries)(_run_on_node)
        sent, out, command = shipped(problems, out, cli)
        originals = {problem.key: problem for problem in problems}
        by_key = {problem.key: problem for problem in sent}
        probe = list(options.health_probe) if options.health_probe else None
        pending: dict[Any, Job] = {}
        submissions = itertools.count()

        def submit(key: str, fault_round: int = 0) -> None:
            job = Job(key, next(submissions), fault_round, fault_round < options.gpu_fault_retries)
            ref = task.remote(
                by_key[key], out, list(run_args), timeout_s, baseline, command, board, job, probe
            )
            pending[ref] = job

        for problem in sent:
            submit(problem.key)
        gpu_count = float(ray.cluster_resources().get("GPU", 0.0))
        dropped: set[str] = set()
        faults: dict[str, list[dict[str, Any]]] = {}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            started, bounced = ray.get(board.news.remote())
            for key in started:
                if on_start is not None:
                    on_start(originals[key])
            for submission in bounced:  # its task now holds a dropped GPU: the problem goes elsewhere
                ref = next((r for r, job in pending.items() if job.submission == submission), None)
                if ref is not None:
                    job = pending.pop(ref)
                    holders.append(ref)
                    submit(job.key, job.fault_round)
            for ref in done:
                if ref not in pending:
                    continue
                job = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except (ray.exceptions.RayError, OSError) as exc:
                    _say(f"{job.key} {_why_lost(ray, exc, options.max_retries)}")
                    continue
                if "bounced" in record:  # a holder whose hand-back was not read yet: send it on
                    submit(job.key, job.fault_round)
                    continue
                fault = record.pop("gpu_fault", None)
                if fault is not None:
                    _drop(out, fault, dropped)
                    faults.setdefault(job.key, []).append(fault)
                    if job.may_retry:
                        if len(dropped) < gpu_count:
                            aside = fault.get("set_aside")
                            _say(
                                f"{job.key} runs again on another GPU"
                                + (f" (its run: OUT/{aside})" if aside else "")
                            )
                            submit(job.key, job.fault_round + 1)
                        else:
                            _say(f"{job.key} not recorded: no healthy GPU is left to run it again")
                        continue
                if job.key in faults:
                    record["gpu_faults"] = faults[job.key]  # the runs that ended on a dropped GPU
                yield record  # the caller's own errors (writing the record) propagate
            if pending and len(dropped) >= gpu_count > 0:
                _say(f"every GPU ({len(dropped)}) is dropped; the problems left are not recorded:")
                for ref, job in pending.items():
                    ray.cancel(ref, force=True)
                    _say(f"  {job.key}: stopped, not recorded; the next eval with this --out runs it")
                pending.clear()
    finally:
        if board is not None:
            board.release.remote()
            if holders:
                ray.wait(holders, num_returns=len(holders), timeout=30)
        if started_here:
            ray.shutdown()


def _drop(out: Path, fault: dict[str, Any], dropped: set[str]) -> None:
    """Note a GPU the probe failed on (once per GPU) in OUT/gpu_health.jsonl and on stderr."""
    keys = {f"{fault['ray_node_id']}/{gpu}" for gpu in str(fault["gpu"]).split(",")}
    if keys <= dropped:
        return
    dropped.update(keys)
    gpu_health.note_drop(out, {k: v for k, v in fault.items() if k != "set_aside"})
    _say(gpu_health.drop_line(fault) + "; no more problems go to it in this eval")
