"""CPU pinning of a timing (tools.worker.cpu_pinning): the spec, the GPU's local cores from sysfs, the
pinned thread, and the rounds and the baseline cache reading the switch alike."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import torch

from tools import baseline_cache
from tools.worker import cpu_pinning
from tools.worker.rounds import Contestant, time_in_rounds

ALLOWED = sorted(os.sched_getaffinity(0))


def test_cpu_lists_parse_as_the_kernel_writes_them() -> None:
    assert cpu_pinning.parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    for bad in ("", "3-1", "a", "-2"):
        with pytest.raises(ValueError):
            cpu_pinning.parse_cpulist(bad)


def test_the_gpu_local_cores_come_from_its_pci_device(tmp_path: Path) -> None:
    device = tmp_path / "0000:1b:00.0"
    device.mkdir()
    (device / "local_cpulist").write_text(f"{ALLOWED[0]}-{ALLOWED[-1]}\n")
    assert cpu_pinning.gpu_local_cpus("0000:1B:00.0", tmp_path) == set(range(ALLOWED[0], ALLOWED[-1] + 1))
    assert cpu_pinning.gpu_local_cpus("0000:99:00.0", tmp_path) is None  # no such device
    assert cpu_pinning.gpu_local_cpus(None, tmp_path) is None
    assert cpu_pinning.cpus_for("gpu", "0000:1b:00.0", tmp_path) == set(ALLOWED)
    assert cpu_pinning.cpus_for("gpu1", "0000:1b:00.0", tmp_path) == {ALLOWED[0]}
    assert cpu_pinning.cpus_for("gpu", "0000:99:00.0", tmp_path) is None  # unknown: unpinned
    assert cpu_pinning.cpus_for("", "0000:1b:00.0", tmp_path) is None


def test_an_explicit_list_keeps_only_the_cores_this_process_may_use() -> None:
    assert cpu_pinning.cpus_for(f"{ALLOWED[-1]},100000", None) == {ALLOWED[-1]}
    assert cpu_pinning.cpus_for("100000", None) is None
    assert cpu_pinning.cpus_for("nonsense", None) is None


def test_the_pinned_thread_runs_on_the_cores_and_gets_its_own_back() -> None:
    before = os.sched_getaffinity(0)
    seen: list[set[int]] = []
    with cpu_pinning.pinned({ALLOWED[-1]}) as used:
        assert used == {ALLOWED[-1]} and os.sched_getaffinity(0) == {ALLOWED[-1]}
        other = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        other.start()
        other.join()
    assert os.sched_getaffinity(0) == before
    with cpu_pinning.pinned(None) as used:
        assert used is None and os.sched_getaffinity(0) == before


def test_the_rounds_pin_when_asked_and_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    one = [Contestant("a", lambda x: x)]
    info = time_in_rounds(one, [[torch.rand(2)]], "cpu", trials=2, pin=str(ALLOWED[-1]))
    assert info["cpus"] == [ALLOWED[-1]]
    assert "cpus" not in time_in_rounds([Contestant("b", lambda x: x)], [[torch.rand(2)]], "cpu", trials=2)
    monkeypatch.setenv(cpu_pinning.CPUS_ENV, str(ALLOWED[0]))
    assert time_in_rounds([Contestant("c", lambda x: x)], [[torch.rand(2)]], "cpu", trials=2)["cpus"] == [
        ALLOWED[0]
    ]


@pytest.mark.parametrize("value", ["", "off", "gpu", "gpu1", "2,4-6"])
def test_a_pinned_time_is_another_timing_method(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_pinning.CPUS_ENV, value)
    pinned = value not in ("", "off")
    assert (f":cpus={value}" in baseline_cache.timing_method({})) == pinned
    assert (":cpus=" in baseline_cache.timing_method({})) == pinned
