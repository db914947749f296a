"""The clock probe's summary of nvidia-smi samples (evals/device/clock_probe.py), on the CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evals.device.clock_probe import main, summarise


def test_the_summary_counts_busy_samples_and_skips_broken_lines() -> None:
    lines = [
        "345, 1980, 0, 70.1",  # idle: not in the clock figures
        "1200, 1980, 35, 180.0",
        "1980, 1980, 99, 650.5",
        "1890, 1980, 80, 600.0",
        "1980, 1980, 97",  # cut short at the end of the run
        "[N/A], 1980, 50, 100.0",
    ]
    got = summarise(lines)
    assert got["samples"] == 4 and got["busy"] == 3
    assert (got["sm_mhz_min"], got["sm_mhz_median"], got["sm_mhz_max"]) == (1200.0, 1890.0, 1980.0)
    assert got["at_90pct_of_top"] == pytest.approx(2 / 3)
    assert got["power_w_median"] == 600.0


def test_an_idle_run_has_no_clock_figures() -> None:
    assert summarise(["345, 1980, 0, 70.1"]) == {"samples": 1, "busy": 0}


def test_the_command_runs_and_its_exit_code_is_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in nvidia-smi samples beside the command; the command's output and exit code come back."""
    fake = tmp_path / "bin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '1980, 1980, 90, 500.0'\nsleep 30\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    rc = main(["--", sys.executable, "-c", "import sys, time; time.sleep(0.3); print('hello'); sys.exit(3)"])
    assert rc == 3
    assert (tmp_path / "out" / "command.log").read_text().strip() == "hello"
    assert "1980" in (tmp_path / "out" / "clocks.csv").read_text()
