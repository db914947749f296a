"""The eval's device health check outside Ray (evals.gpu_health): which records are suspect, how a
probe's answer is read (real processes stand in for the probe), and the dropped-GPU store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evals import gpu_health, runner


def test_a_record_is_suspect_when_its_last_evaluation_faulted() -> None:
    assert gpu_health.suspect({"last_attempt_status": "runtime_error"}) == "runtime_error"
    assert gpu_health.suspect({"last_attempt_status": "crashed"}) == "crashed"
    assert gpu_health.suspect({"last_attempt_status": "no_report"}) == "no_report"
    assert gpu_health.suspect({"last_attempt_status": "passed"}) is None
    assert (
        gpu_health.suspect({"last_attempt_status": "wrong_output"}) is None
    )  # a wrong answer is not a fault
    assert gpu_health.suspect({}) is None


def test_records_carry_their_last_evaluations_status(tmp_path: Path) -> None:
    report = {"status": "failed", "attempts": [{"status": "crashed"}, {"status": "runtime_error"}]}
    assert runner.record_from_report(report, tmp_path)["last_attempt_status"] == "runtime_error"
    assert runner.record_from_report({"status": "failed"}, tmp_path)["last_attempt_status"] is None


def _probe(code: str, timeout_s: float = 60.0) -> gpu_health.ProbeResult:
    return gpu_health.run_probe([sys.executable, "-c", code], timeout_s=timeout_s)


def test_the_probes_answer_is_read() -> None:
    assert _probe('print(\'{"ok": true, "devices": []}\')').ok
    failed = _probe(
        "import json, sys; print(json.dumps({'ok': False, 'devices': [{'index': 0, 'ok': True}, "
        "{'index': 1, 'ok': False, 'error': 'x'}], 'error': 'device 1: x'})); sys.exit(1)"
    )
    assert not failed.ok and failed.reason == "device 1: x" and failed.failed_indices(2) == [1]
    died = _probe("import os, sys; sys.stderr.write('Segmentation fault\\n'); os.abort()")
    assert not died.ok and died.reason == "Segmentation fault" and died.failed_indices(2) == [0, 1]
    hung = _probe("import time; time.sleep(30)", timeout_s=1.0)
    assert not hung.ok and hung.reason == "the probe hung for 1 s"
    missing = gpu_health.run_probe(["/nonexistent/probe"])
    assert not missing.ok and missing.reason.startswith("the probe did not start")


def test_the_default_probe_is_the_workers_on_the_nodes_own_interpreter() -> None:
    assert gpu_health.probe_command(None) == [sys.executable, "-m", "tools.worker.probe"]
    assert gpu_health.probe_command(["x", "y"]) == ["x", "y"]


def test_dropped_gpus_are_kept_and_read_back(tmp_path: Path) -> None:
    drop = {
        "gpu": "1",
        "uuid": "GPU-b",
        "node": "n1",
        "problem": "level1/1_a",
        "status": "crashed",
        "reason": "r",
    }
    gpu_health.note_drop(tmp_path, drop)
    with (tmp_path / gpu_health.DROPS_FILE).open("a") as fh:
        fh.write('{"gpu": "2", "torn')
    assert gpu_health.read_drops(tmp_path) == [drop]
    assert gpu_health.drop_line(drop) == (
        "GPU 1 (GPU-b) of node n1 dropped after level1/1_a (crashed): the probe failed: r"
    )
    summary = runner.write_summary(tmp_path, [], [])
    assert summary["dropped_gpus"] == [drop] and "## Dropped GPUs" in (tmp_path / "table.md").read_text()
    assert json.loads((tmp_path / "summary.json").read_text())["dropped_gpus"] == [drop]


# A stand-in run (it writes its report at once) and probe: "Breaks" breaks the GPU on its first run
# (a file the probe reads) and ends in runtime_error; "Crashes" ends crashed; the others verify.
LOCAL_RUN = """
import json, sys
from pathlib import Path
state = Path({state!r})
argv = sys.argv[1:]
problem = Path(next(a for a in argv if a.endswith(".py"))).stem
out = Path(argv[argv.index("--out") + 1])
with (state / "runs.txt").open("a") as fh:
    fh.write(problem + "\\n")
last, status = "passed", "verified"
if "Breaks" in problem and not (state / "broke").exists():
    (state / "broke").touch()
    (state / "broken").touch()
    last, status = "runtime_error", "failed"
elif "Crashes" in problem:
    last, status = "crashed", "failed"
out.mkdir(parents=True, exist_ok=True)
(out / "report.json").write_text(json.dumps({{"status": status, "attempts": [{{"status": last}}]}}))
"""
LOCAL_PROBE = """
import json, sys
from pathlib import Path
if (Path({state!r}) / "broken").exists():
    print(json.dumps({{"ok": False, "error": "device 0: CUDA error: unspecified launch failure"}}))
    sys.exit(1)
print(json.dumps({{"ok": True, "devices": []}}))
"""


def test_the_local_executor_stops_when_its_gpu_fails_the_probe(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """One GPU, so nowhere to run again: the faulted run and the rest are not recorded, and the next
    eval with the same OUT runs them once the GPU is fixed. A crash on a healthy GPU is a record."""
    state = tmp_path / "state"
    state.mkdir()
    source = (Path(__file__).resolve().parents[1] / "fixtures" / "problems" / "scale_relu.py").read_text()
    for name in ("1_Crashes", "2_Breaks", "3_a", "4_b"):
        (tmp_path / "suite" / "level1").mkdir(parents=True, exist_ok=True)
        (tmp_path / "suite" / "level1" / f"{name}.py").write_text(source)
    problems = runner.discover([str(tmp_path / "suite")])
    out = tmp_path / "out"
    cli = [sys.executable, "-c", LOCAL_RUN.format(state=str(state))]
    probe = [sys.executable, "-c", LOCAL_PROBE.format(state=str(state))]
    args = ["--device", "cpu"]
    records = runner.run_suite(problems, out, args, jobs=1, cli=cli, health_probe=probe)
    assert [(r["problem"], r["status"]) for r in records] == [("level1/1_Crashes", "failed")]
    assert records[0]["gpu_probe"]["ok"]  # probed, healthy: the crash is the problem's own
    assert (state / "runs.txt").read_text().split() == ["1_Crashes", "2_Breaks"]  # nothing ran after
    assert (out / "runs" / "level1" / "2_Breaks.gpu-fault-1" / "report.json").exists()  # set aside
    (drop,) = gpu_health.read_drops(out)
    assert drop["problem"] == "level1/2_Breaks" and "unspecified launch failure" in drop["reason"]
    err = capsys.readouterr().err
    assert "level1/2_Breaks, level1/3_a, level1/4_b" in err and "the eval stops" in err

    (state / "broken").unlink()  # the GPU is fixed: the next eval runs what is missing, from scratch
    again = runner.run_suite(problems, out, args, jobs=1, cli=cli, health_probe=probe)
    assert sorted((r["problem"], r["status"]) for r in again) == [
        ("level1/1_Crashes", "failed"), ("level1/2_Breaks", "verified"),
        ("level1/3_a", "verified"), ("level1/4_b", "verified"),
    ]  # fmt: skip
    assert len((out / "results.jsonl").read_text().splitlines()) == 4
