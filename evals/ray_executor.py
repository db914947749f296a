"""The Ray executor of `stitchcuda eval`: each problem a Ray task that needs one GPU.

Why: a user with a cluster (or an RL loop that needs thousands of evaluations) already runs Ray;
spreading the suite over its GPUs and nodes needs no scheduler of ours. Each task runs exactly what
the local executor runs for one problem (evals.runner.run_one: the CLI run in its own process, then
the baselines) on the GPU Ray gave it (Ray sets CUDA_VISIBLE_DEVICES, which the run inherits), and
returns the record; the driver appends each record to OUT/results.jsonl as its task finishes, so
resume works as it does locally: what is recorded is skipped, the rest runs.

Failures: a task whose worker or node dies is retried by Ray on a fresh worker (`max_retries`,
system failures only); a problem's own failure is a record, not an exception, so it is never
retried. A GPU fault inside a candidate (a kernel that corrupts its CUDA context) is the problem's
own failure: it happens in that evaluation's worker process (tools.evaluate), which reports
runtime_error or crashed, and the graph's next evaluation runs in a fresh process. A problem whose
retries all fail, or whose task raised, gets no record (the next invocation with the same OUT runs
it again) and is named on stderr. Without an address a local Ray instance is started (`num_gpus`
declares its GPUs: logical ones on a machine without any, as the tests do).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evals.runner import DEFAULT_CLI, REPO, BaselineConfig, SuiteProblem, run_one, where_it_ran

DEFAULT_RETRIES = 3
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

    def run(
        self,
        problems: Sequence[SuiteProblem],
        out: Path,
        run_args: Sequence[str],
        timeout_s: float,
        baseline: BaselineConfig | None,
        cli: Sequence[str],
    ) -> Iterator[dict[str, Any]]:
        """What evals.runner.run_suite calls (so the runner never imports this module)."""
        return run_on_ray(problems, out, run_args, timeout_s, baseline, cli, self)


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


def _run_on_node(
    problem: SuiteProblem,
    out: Path,
    run_args: Sequence[str],
    timeout_s: float,
    baseline: BaselineConfig | None,
    cli: Sequence[str] | None,
) -> dict[str, Any]:
    """The task body: the local executor's run_one, plus where Ray placed it."""
    ray = _ray()
    record = run_one(problem, out, run_args, timeout_s, baseline, cli or DEFAULT_CLI, executor="ray")
    placed = where_it_ran("ray")
    record.update(placed)
    record["ray_node_id"] = ray.get_runtime_context().get_node_id()
    record["gpu"] = ",".join(str(g) for g in ray.get_gpu_ids()) or placed["gpu"]
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


def run_on_ray(
    problems: Sequence[SuiteProblem],
    out: Path,
    run_args: Sequence[str],
    timeout_s: float,
    baseline: BaselineConfig | None,
    cli: Sequence[str],
    options: RayOptions,
) -> Iterator[dict[str, Any]]:
    """Yield each problem's record as its task finishes (in completion order)."""
    if not problems:
        return
    ray = _ray()
    started_here = connect(options)
    try:
        task = ray.remote(num_gpus=options.gpus_per_task, max_retries=options.max_retries)(_run_on_node)
        sent, out, command = shipped(problems, out, cli)
        pending = {
            task.remote(problem, out, list(run_args), timeout_s, baseline, command): original
            for problem, original in zip(sent, problems, strict=True)
        }
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                problem = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except (ray.exceptions.RayError, OSError) as exc:
                    print(
                        f"stitchcuda: {problem.key} {_why_lost(ray, exc, options.max_retries)}",
                        file=sys.stderr,
                    )
                    continue
                yield record  # outside the try: the caller's own errors (writing the record) propagate
    finally:
        if started_here:
            ray.shutdown()
