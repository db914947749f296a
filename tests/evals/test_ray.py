"""`stitchcuda eval --executor ray`: a real local Ray instance with two logical GPUs, the real CLI and
graph per problem (scripted policy), a worker killed mid-task, and resume from OUT/results.jsonl."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from support.eval_suite import RUN_ARGS, WRAPPER

from evals import runner

ray = pytest.importorskip("ray")

# The first run of 1_ScaleRelu kills the Ray worker that runs it (as a lost node would), once.
KILL_ONCE = """
import os, signal, sys
from pathlib import Path
marker = Path(os.environ["STITCHCUDA_TEST_KILL_MARKER"])
if "1_ScaleRelu.py" in " ".join(sys.argv) and not marker.exists():
    marker.write_text(str(os.getppid()))
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(1)
""" + WRAPPER.split("\n", 1)[1]


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    marker = tmp_path_factory.mktemp("ray") / "killed"
    os.environ["STITCHCUDA_TEST_KILL_MARKER"] = str(marker)
    env = {"PYTHONPATH": str(REPO), "STITCHCUDA_TEST_KILL_MARKER": str(marker)}
    for name in ("STITCHCUDA_CACHE", "STITCHCUDA_RAG_DIR", "PATH"):
        if name in os.environ:
            env[name] = os.environ[name]
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, runtime_env={"env_vars": env})
    yield marker
    ray.shutdown()


def _suite(root: Path) -> list[runner.SuiteProblem]:
    source = (REPO / "tests" / "fixtures" / "problems" / "scale_relu.py").read_text()
    for rel in ("level1/1_ScaleRelu.py", "level1/2_ScaleReluBroken.py"):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return runner.discover([str(root)])


@pytest.mark.slow
def test_each_problem_is_a_gpu_task_and_a_lost_worker_is_retried(local_ray: Path, tmp_path: Path) -> None:
    from evals.ray_executor import RayOptions

    problems = _suite(tmp_path / "suite")
    out = tmp_path / "out"
    cli = [sys.executable, "-c", KILL_ONCE]
    seen: list[dict[str, Any]] = []
    records = runner.run_suite(
        problems, out, [*RUN_ARGS, "--policy", "scripted"], cli=cli, on_done=seen.append, ray=RayOptions()
    )
    assert local_ray.exists(), "the first attempt did not run (no worker was killed)"
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["problem"] for r in lines) == ["level1/1_ScaleRelu", "level1/2_ScaleReluBroken"]
    by_key = {r["problem"]: r for r in records}
    ok, broken = by_key["level1/1_ScaleRelu"], by_key["level1/2_ScaleReluBroken"]
    assert ok["status"] == "verified", ok  # retried after its worker died, then finished
    assert broken["status"] == "failed"  # a problem's own failure is a record, not a retry
    for record in records:
        assert record["executor"] == "ray" and record["node"] and record["ray_node_id"]
        assert record["gpu"] in ("0", "1")  # Ray's logical GPU, one per task
        assert set(record["breakdown"]) >= {"build_s", "timing_s", "baselines_s"}

    again: list[dict[str, Any]] = []
    runner.run_suite(
        problems, out, [*RUN_ARGS, "--policy", "scripted"], cli=cli, on_done=again.append, ray=RayOptions()
    )
    assert again == []  # resume: everything is recorded, nothing runs
    assert (out / "results.jsonl").read_text().count("\n") == 2


def test_the_cli_hands_ray_options_to_the_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evals.ray_executor import RayOptions
    from graph.cli import main

    _suite(tmp_path / "suite")
    seen: dict[str, Any] = {}

    def record_call(problems: Any, out_dir: Any, run_args: Any, **kwargs: Any) -> list[Any]:
        seen.update(kwargs)
        return []

    monkeypatch.setattr(runner, "run_suite", record_call)
    argv = ["eval", str(tmp_path / "suite"), "--out", str(tmp_path / "out"), "--no-baselines"]
    assert main([*argv, "--executor", "ray", "--ray-address", "auto", "--", "--device", "cpu"]) == 0
    assert seen["ray"] == RayOptions(address="auto")
    assert main([*argv, "--executor", "ray", "--ray-gpus", "2", "--", "--device", "cpu"]) == 0
    assert seen["ray"] == RayOptions(num_gpus=2)
    assert main([*argv, "--", "--device", "cpu"]) == 0 and seen["ray"] is None
    assert main([*argv, "--executor", "ray", "--ray-gpus-per-task", "0", "--", "--device", "cpu"]) != 0
