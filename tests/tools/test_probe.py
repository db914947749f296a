"""The GPU health probe (`python -m tools.worker.probe`, issue 15): its answers on the CPU machine,
and, with CUDA's answers stood in for, what it says about a missing or faulting device."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from conftest import REPO

from tools.worker import probe


def test_a_machine_without_a_driver_has_nothing_to_probe() -> None:
    if probe.driver_present():
        pytest.skip("this machine has an NVIDIA driver")
    proc = subprocess.run(
        [sys.executable, "-m", "tools.worker.probe"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    answer = json.loads(proc.stdout.splitlines()[-1])
    assert proc.returncode == 0 and answer["ok"] and answer["devices"] == [], proc.stderr
    assert "nothing to probe" in answer["note"]


def test_a_driver_without_a_usable_device_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "driver_present", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    answer = probe.probe()
    assert not answer["ok"] and "CUDA sees no usable device (CUDA_VISIBLE_DEVICES=3)" in answer["error"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no device asked for: nothing to probe
    assert probe.probe()["ok"]


def test_a_faulting_device_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)

    def check(index: int) -> dict:
        if index == 1:
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")
        return {"index": index, "uuid": "GPU-a", "name": "stand-in"}

    monkeypatch.setattr(probe, "check_device", check)
    assert probe.main() == 1
    answer = json.loads(capsys.readouterr().out)
    assert [d["ok"] for d in answer["devices"]] == [True, False]
    assert answer["error"] == "device 1: RuntimeError: CUDA error: an illegal memory access was encountered"


def test_cuda_failing_to_start_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> bool:
        raise RuntimeError("cuInit: CUDA_ERROR_NO_DEVICE")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    answer = probe.probe()
    assert not answer["ok"] and answer["error"].startswith("CUDA failed to start: RuntimeError: cuInit")
