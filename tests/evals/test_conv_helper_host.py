"""The conv helper's host-time benchmark (evals/benchmarks/conv_helper_host.py) runs and times both."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from evals.benchmarks.conv_helper_host import REPO, main


def test_the_benchmark_times_the_helper_now_and_at_a_revision(capsys: pytest.CaptureFixture[str]) -> None:
    if (
        shutil.which("git") is None
        or subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, check=False
        ).returncode
    ):
        pytest.skip("not a git checkout")
    assert main(["--against", "HEAD", "--calls", "50", "--rounds", "1"]) == 0  # HEAD: a shallow clone has it
    rows = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and "us per" not in line
    ]
    assert [row.split("|")[1].strip() for row in rows] == ["HEAD", "now"]
    assert all(float(row.split("|")[2]) > 0 for row in rows)
