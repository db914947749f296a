"""The device health check of `stitchcuda eval --executor ray` (issue 15 point 3) on a real local Ray
instance with two logical GPUs, started by the executor's own `connect`.

The run command and the GPU probe are stand-ins the test controls (the graph itself runs in
tests/evals/test_ray.py): a run writes its report at once, and one problem's first run "breaks" the
GPU it ran on (it writes that GPU's id to a file the stand-in probe reads). After a run whose last
evaluation ended in runtime_error or crashed, the task probes its GPU in a fresh process:

- the broken GPU fails the probe: it is dropped for the rest of the eval (no run starts on it
  afterwards), the problem's faulted run is set aside and the problem runs again on the other GPU,
  recorded once; OUT/gpu_health.jsonl and the summary name the GPU and the probe's reason;
- a problem whose candidate crashes while its GPU passes the probe keeps its record (its own
  failure), attempted once;
- the other problems all finish on the healthy GPU; the progress callback hears of every start;
- when every GPU is dropped the eval ends instead of waiting for a GPU, and names what it left.

Skips without Ray unless STITCHCUDA_REQUIRE_RAY=1 (which .ci/run sets).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from support.ray_tests import require_ray

from evals import gpu_health, runner

ray = require_ray()

# The run: logs start and end (problem, the GPU Ray gave it), then writes a report whose attempts end
# as the problem's name says. "Breaks" marks its GPU broken on its first run and ends in
# runtime_error, then verifies; "Crashes" ends crashed on a healthy GPU; the others verify after
# `{pause}` seconds.
FAKE_RUN = """
import json, os, sys, time
from pathlib import Path
state = Path({state!r})
argv = sys.argv[1:]
problem = Path(next(a for a in argv if a.endswith(".py"))).stem
out = Path(argv[argv.index("--out") + 1])
gpu = os.environ.get("CUDA_VISIBLE_DEVICES")

def note(event):
    with (state / "runs.jsonl").open("a") as fh:
        fh.write(json.dumps({{"problem": problem, "event": event, "gpu": gpu, "t": time.time()}}) + "\\n")

note("start")
broken = state / "broken"
attempts = [{{"status": "passed"}}]
status = "verified"
if "Breaks" in problem and not (state / f"broke-{{problem}}").exists():
    (state / f"broke-{{problem}}").write_text(gpu)
    with broken.open("a") as fh:
        fh.write(gpu + "\\n")
    attempts, status = [{{"status": "passed"}}, {{"status": "runtime_error"}}], "failed"
elif "Crashes" in problem:
    attempts, status = [{{"status": "crashed"}}], "failed"
else:
    time.sleep({pause})
out.mkdir(parents=True, exist_ok=True)
(out / "report.json").write_text(json.dumps({{"status": status, "iterations": 1, "attempts": attempts}}))
note("end")
"""

# The probe: fails for a GPU listed in the broken file, as tools.worker.probe answers.
FAKE_PROBE = """
import json, os, sys, time
from pathlib import Path
state = Path({state!r})
gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
broken = (state / "broken").read_text().split() if (state / "broken").exists() else []
with (state / "probes.jsonl").open("a") as fh:
    fh.write(json.dumps({{"gpu": gpu, "broken": gpu in broken, "t": time.time()}}) + "\\n")
if gpu in broken:
    print(json.dumps({{"ok": False, "devices": [{{"index": 0, "ok": False, "uuid": "GPU-stand-in-" + gpu,
                       "error": "CUDA error: unspecified launch failure"}}],
                      "error": "device 0: CUDA error: unspecified launch failure"}}))
    sys.exit(1)
print(json.dumps({{"ok": True, "devices": [{{"index": 0, "ok": True}}]}}))
"""


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    from evals.ray_executor import RayOptions, connect

    try:
        assert connect(RayOptions(num_gpus=2)), "a Ray instance was already running"
        assert ray.cluster_resources().get("GPU") == 2
        yield
    finally:
        ray.shutdown()


def _suite(root: Path, names: list[str]) -> list[runner.SuiteProblem]:
    source = (REPO / "tests" / "fixtures" / "problems" / "scale_relu.py").read_text()
    for name in names:
        path = root / "level1" / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return runner.discover([str(root)])


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _run(tmp_path: Path, names: list[str], pause: float) -> tuple[Path, Path, list[Any], list[str]]:
    from evals.ray_executor import RayOptions

    state = tmp_path / "state"
    state.mkdir()
    problems = _suite(tmp_path / "suite", names)
    out = tmp_path / "out"
    cli = [sys.executable, "-c", FAKE_RUN.format(state=str(state), pause=pause)]
    probe = (sys.executable, "-c", FAKE_PROBE.format(state=str(state)))
    events: list[str] = []  # "start KEY" (the progress bar's in flight) and "done KEY", in order
    records = runner.run_suite(
        problems,
        out,
        ["--device", "cpu"],
        cli=cli,
        ray=RayOptions(health_probe=probe),
        on_start=lambda problem: events.append(f"start {problem.key}"),
        on_done=lambda record: events.append(f"done {record['problem']}"),
    )
    runner.write_summary(out, records, problems)
    return state, out, records, events


@pytest.mark.slow
def test_a_broken_gpu_is_dropped_and_its_problem_runs_again_elsewhere(
    local_ray: None, tmp_path: Path
) -> None:
    names = ["1_Breaks", "2_Crashes", "3_a", "4_b", "5_c", "6_d", "7_e", "8_f"]
    state, out, records, events = _run(tmp_path, names, pause=0.5)
    keys = [f"level1/{name}" for name in names]

    # One line per problem in the store: the faulted run's record was replaced, not added to.
    lines = _lines(out / "results.jsonl")
    assert sorted(r["problem"] for r in lines) == keys
    by_key = {r["problem"]: r for r in records}
    bad = (state / "broke-1_Breaks").read_text()
    good = {"0": "1", "1": "0"}[bad]

    # The breaking problem: probed, its GPU dropped, run again on the other GPU and verified there.
    breaks = by_key["level1/1_Breaks"]
    assert breaks["status"] == "verified" and breaks["gpu"] == good, breaks
    (fault,) = breaks["gpu_faults"]
    assert fault["gpu"] == bad and fault["status"] == "runtime_error"
    assert "unspecified launch failure" in fault["reason"] and fault["uuid"] == f"GPU-stand-in-{bad}"
    aside = out / "runs" / "level1" / "1_Breaks.gpu-fault-1" / "report.json"
    assert json.loads(aside.read_text())["status"] == "failed"  # the faulted run, set aside
    assert (
        json.loads((out / "runs" / "level1" / "1_Breaks" / "report.json").read_text())["status"] == "verified"
    )

    # No run started on the dropped GPU after its failed probe; every other problem finished.
    failed_probe = next(p for p in _lines(state / "probes.jsonl") if p["broken"])
    runs = _lines(state / "runs.jsonl")
    assert not [r for r in runs if r["event"] == "start" and r["gpu"] == bad and r["t"] > failed_probe["t"]]
    assert all(by_key[key]["status"] == "verified" for key in keys[2:])
    assert len([r for r in runs if r["event"] == "start"]) == len(names) + 1  # one rerun, nothing else

    # A crash on a healthy GPU is the problem's own: its probe passed, its record stays, run once.
    crashes = by_key["level1/2_Crashes"]
    assert crashes["status"] == "failed" and crashes["gpu_probe"]["ok"] and "gpu_faults" not in crashes
    assert len([r for r in runs if r["problem"] == "2_Crashes" and r["event"] == "start"]) == 1
    assert sum(p["broken"] for p in _lines(state / "probes.jsonl")) == 1

    # The summary says which GPU was dropped and why; the progress heard of every start.
    (drop,) = json.loads((out / "summary.json").read_text())["dropped_gpus"]
    assert drop["gpu"] == bad and drop["problem"] == "level1/1_Breaks" and drop["ray_node_id"]
    assert gpu_health.read_drops(out) == [drop]
    table = (out / "table.md").read_text()
    assert f"GPU {bad} (GPU-stand-in-{bad}) of node " in table and "unspecified launch failure" in table
    started = [e.split()[1] for e in events if e.startswith("start ")]
    assert sorted(set(started)) == keys and started.count("level1/1_Breaks") == 2
    for key in keys:  # each problem was in flight before it was done
        assert events.index(f"start {key}") < events.index(f"done {key}")


@pytest.mark.slow
def test_when_every_gpu_is_dropped_the_eval_ends_and_names_what_it_left(
    local_ray: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two problems break the two GPUs they start on: no GPU is left to run anything, so the eval ends
    (it does not wait for a GPU that never comes back) and names every problem it did not record."""
    names = ["1_Breaks", "2_Breaks", "3_a", "4_b", "5_c", "6_d"]
    state, out, records, _ = _run(tmp_path, names, pause=3.0)
    lines = _lines(out / "results.jsonl")
    assert len(lines) == len({r["problem"] for r in lines}) == len(records)  # nothing recorded twice
    drops = gpu_health.read_drops(out)
    assert sorted(d["gpu"] for d in drops) == ["0", "1"]  # both GPUs, once each
    assert not any(r["problem"].endswith("Breaks") for r in lines)  # a faulted run is never a record
    err = capsys.readouterr().err
    assert "every GPU (2) is dropped" in err
    recorded = {r["problem"] for r in lines}
    left = [f"level1/{name}" for name in names if f"level1/{name}" not in recorded]
    assert "level1/1_Breaks" in left and "level1/2_Breaks" in left
    assert all(key in err for key in left), err
