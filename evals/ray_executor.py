"""The Ray executor of `stitchcuda eval`: each problem a Ray task that needs one GPU.

Why: a user with a cluster (or an RL loop that needs thousands of evaluations) already runs Ray;
spreading the suite over its GPUs and nodes needs no scheduler of ours. Each task runs exactly what
the local executor runs for one problem (evals.runner.run_one: the CLI run in its own process, then
the baselines) on the GPU Ray gave it (Ray sets CUDA_VISIBLE_DEVICES, which the run inherits), and
returns the record; the driver appends each record to OUT/results.jsonl as its task finishes, so
resume works as it does locally: what is recorded is skipped, the rest runs.

Failures: a task whose worker or node dies is retried by Ray (`max_retries`, system failures
only); a problem's own failure is a record, not an exception, so it is never retried. A problem
whose retries all fail gets no record (the next invocation with the same OUT runs it again) and
is named on stderr. Without an address a local Ray instance is started (`num_gpus` declares its
GPUs: logical ones on a machine without any, as the tests do).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.runner import REPO, BaselineConfig, SuiteProblem, run_one, where_it_ran

DEFAULT_RETRIES = 3


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
    cli: Sequence[str],
) -> dict[str, Any]:
    """The task body: the local executor's run_one, plus where Ray placed it."""
    ray = _ray()
    record = run_one(problem, out, run_args, timeout_s, baseline, cli, executor="ray")
    placed = where_it_ran("ray")
    record.update(placed)
    record["ray_node_id"] = ray.get_runtime_context().get_node_id()
    record["gpu"] = ",".join(str(g) for g in ray.get_gpu_ids()) or placed["gpu"]
    return record


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
        pending = {
            task.remote(problem, out, list(run_args), timeout_s, baseline, list(cli)): problem
            for problem in problems
        }
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                problem = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except (ray.exceptions.RayError, OSError) as exc:
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    print(
                        f"stitchcuda: {problem.key} lost after {options.max_retries} retries ({first});"
                        " not recorded, so the next eval with this --out runs it again",
                        file=sys.stderr,
                    )
    finally:
        if started_here:
            ray.shutdown()
