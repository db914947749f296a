"""`stitchcuda eval --executor ray --ray-address ADDR`: a lost node, on a real Ray cluster of three
local nodes (a head without GPUs and two nodes of one logical GPU each, `ray.cluster_utils`).

The run command here is a stand-in for `stitchcuda run` that writes a report at once (the graph
runs in tests/evals/test_ray.py), so the test costs the cluster's start and little more. The first
attempt of one problem kills its own node's raylet and its Ray worker (SIGKILL: the node is gone);
Ray retries the task on the other node, the record names that node, the other problem is recorded
once, and nothing is lost.

Skips without Ray unless STITCHCUDA_REQUIRE_RAY=1 (which .ci/run sets).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from support.ray_tests import require_ray

from evals import runner

ray = require_ray()
from ray.cluster_utils import Cluster  # noqa: E402

# Logs each attempt with its Ray worker's parent (the node's raylet), then writes a verified report.
FAKE_RUN = """
import json, os, signal, sys, time
from pathlib import Path
argv = sys.argv[1:]
problem = Path(next(a for a in argv if a.endswith(".py"))).stem
out = Path(argv[argv.index("--out") + 1])
raylet = int(Path(f"/proc/{os.getppid()}/stat").read_text().rsplit(")", 1)[1].split()[1])
log = Path(os.environ["STITCHCUDA_TEST_RAY_LOG"])
with log.open("a") as fh:
    fh.write(json.dumps({"problem": problem, "raylet": raylet, "t": time.time()}) + "\\n")
doomed = log.with_name("doomed")
if problem == "1_Doomed" and not doomed.exists():
    doomed.write_text(str(raylet))
    os.kill(raylet, signal.SIGKILL)  # the node is gone, and with it the Ray worker running this task
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(1)
out.mkdir(parents=True, exist_ok=True)
(out / "report.json").write_text(json.dumps({"status": "verified", "iterations": 1, "attempts": []}))
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    from evals.ray_executor import RayOptions, connect

    log = tmp_path_factory.mktemp("ray-cluster") / "attempts.jsonl"
    log.touch()
    saved = os.environ.get("STITCHCUDA_TEST_RAY_LOG")
    os.environ["STITCHCUDA_TEST_RAY_LOG"] = str(log)  # inherited by every node's workers
    # Node deaths are noticed within about a second (Ray's default health check takes ~15 s).
    config = {"health_check_period_ms": 200, "health_check_failure_threshold": 3}
    head: dict[str, Any] = {"num_cpus": 1, "num_gpus": 0, "_system_config": config}
    nodes = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(2):
            nodes.add_node(num_cpus=1, num_gpus=1)
        nodes.wait_for_nodes()
        assert connect(RayOptions(address=nodes.address)), "a Ray instance was already running"
        yield nodes, log
    finally:
        ray.shutdown()
        nodes.shutdown()
        if saved is None:
            os.environ.pop("STITCHCUDA_TEST_RAY_LOG", None)
        else:
            os.environ["STITCHCUDA_TEST_RAY_LOG"] = saved


@pytest.mark.slow
def test_a_lost_node_is_retried_on_another_and_nothing_is_lost(
    cluster: tuple[Cluster, Path], tmp_path: Path
) -> None:
    from evals.ray_executor import RayOptions

    _, log = cluster
    source = (REPO / "tests" / "fixtures" / "problems" / "scale_relu.py").read_text()
    for key in ("level1/1_Doomed", "level1/2_Bystander"):
        (tmp_path / "suite" / "level1").mkdir(parents=True, exist_ok=True)
        (tmp_path / "suite" / f"{key}.py").write_text(source)
    problems = runner.discover([str(tmp_path / "suite")])
    out = tmp_path / "out"
    gpu_nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")}
    assert len(gpu_nodes) == 2

    records = runner.run_suite(problems, out, [], cli=[sys.executable, "-c", FAKE_RUN], ray=RayOptions())
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["problem"] for r in lines) == ["level1/1_Doomed", "level1/2_Bystander"]
    attempts = [json.loads(line) for line in log.read_text().splitlines()]
    doomed = [a for a in attempts if a["problem"] == "1_Doomed"]
    assert len(doomed) == 2 and doomed[0]["raylet"] != doomed[1]["raylet"]  # retried on the other node
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")}
    (survivor,) = alive
    by_key = {r["problem"]: r for r in records}
    assert by_key["level1/1_Doomed"]["ray_node_id"] == survivor
    assert by_key["level1/1_Doomed"]["status"] == "verified"
    for record in records:
        assert record["executor"] == "ray" and record["node"] and record["gpu"] == "0"
        assert record["ray_node_id"] in gpu_nodes
