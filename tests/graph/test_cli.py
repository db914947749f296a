"""The `stitchcuda` command line: bad input, a full run, outputs, exit codes and resume."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES, REPO, has_cuda
from support.scripted_policy import OPTIMIZED, ScriptedPolicy, install, uninstall

from graph.cli import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_UNVERIFIED, EXIT_VERIFIED, main

PROBLEM = str(FIXTURES / "problems" / "scale_relu.py")
CPU_ARGS = ["--device", "cpu", "--perf-trials", "5", "--quiet"]


@pytest.fixture
def scripted():
    installed: list[ScriptedPolicy] = []

    def make(script):
        policy = ScriptedPolicy(list(script))
        install(policy)
        installed.append(policy)
        return policy

    yield make
    for p in installed:
        uninstall(p)


def test_malformed_problem_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\ndef get_inputs():\n    return [torch.rand(4)]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "graph.cli", "run", str(bad), "--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == EXIT_BAD_INPUT
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "broken.py" in lines[0] and "Model" in lines[0]
    assert "Traceback" not in proc.stderr


def test_missing_file_and_unknown_policy_are_bad_input(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.py")]) == EXIT_BAD_INPUT
    assert "nope.py" in capsys.readouterr().err
    assert main(["run", PROBLEM, "--policy", "nonexistent", "--out", str(tmp_path)]) == EXIT_BAD_INPUT
    assert "unknown policy" in capsys.readouterr().err


def test_run_writes_solution_and_reports(tmp_path, scripted, capsys):
    scripted([OPTIMIZED, OPTIMIZED])
    out = tmp_path / "out"
    code = main(["run", PROBLEM, "--policy", "scripted", "--out", str(out), *CPU_ARGS])
    assert code == EXIT_VERIFIED
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "verified" and summary["problem"] == "scale_relu"
    report = json.loads((out / "report.json").read_text())
    for key in ("status", "speedup_vs_eager", "iterations", "covered_ops", "uncovered_ops"):
        assert key in report
    assert report["status"] == "verified" and report["speedup_vs_eager"] > 0
    assert (out / "solution.py").read_text() == OPTIMIZED
    assert "# StitchCUDA report: scale_relu" in (out / "report.md").read_text()


def test_interrupted_run_resumes_with_thread(tmp_path, scripted, capsys):
    policy = scripted([RuntimeError("worker machine went away"), OPTIMIZED, OPTIMIZED])
    out = tmp_path / "out"
    args = ["run", PROBLEM, "--policy", "scripted", "--out", str(out), "--thread", "t42", *CPU_ARGS]
    assert main(args) == EXIT_FAILED
    assert "resume with --thread t42" in capsys.readouterr().err
    assert main(args) == EXIT_VERIFIED
    assert json.loads((out / "report.json").read_text())["status"] == "verified"
    # the planner did not run again: the second invocation continued at the coder
    assert [c.method for c in policy.calls if c.method != "advise"] == ["write", "write", "revise"]


@pytest.mark.slow
@pytest.mark.skipif(has_cuda(), reason="checks the no-GPU path")
def test_offline_policy_without_gpu_builds_then_reports_unverified(tmp_path):
    out = tmp_path / "relu"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "graph.cli",
            "run",
            "evals/suite/level1/1_ReLU.py",
            "--out",
            str(out),
            "--quiet",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == EXIT_UNVERIFIED, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "unverified"
    assert "CUDA" in report["status_reason"] or "GPU" in report["status_reason"]
    assert report["build_s"] and report["build_s"] > 0
    assert "__global__" in (out / "solution.py").read_text()
