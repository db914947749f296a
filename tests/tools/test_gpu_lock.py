"""The device lock is one file per physical GPU (issue 15): named by the GPU's UUID, whatever index
CUDA_VISIBLE_DEVICES gave it, so problems on different GPUs of one node never take turns while two
workers on the same GPU still do. On the CPU, CUDA's answers are stood in for (the device
properties); the contention runs in real helper processes on the real lock files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import REPO

from tools.worker import gpu_lock

UUIDS = {0: "6f1c2b7e-0000-4e2a-9a51-aa0000000000", 1: "0d9e44f3-1111-4b7c-8e02-bb1111111111"}


def fake_cuda(monkeypatch: pytest.MonkeyPatch, uuids: dict[int, str], current: int = 0) -> None:
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda index: SimpleNamespace(
            uuid=uuids[index], pci_domain_id=0, pci_bus_id=0x1A + index, pci_device_id=0
        ),
    )


def test_each_gpu_has_its_own_lock_named_by_its_uuid(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_cuda(monkeypatch, UUIDS)
    first = gpu_lock.lock_path(tmp_path, torch.device("cuda", 0))
    second = gpu_lock.lock_path(tmp_path, "cuda:1")
    assert first == tmp_path / f"gpu-{UUIDS[0]}.lock" and second == tmp_path / f"gpu-{UUIDS[1]}.lock"
    assert gpu_lock.lock_path(tmp_path, "cuda") == first  # "cuda": the current device
    assert gpu_lock.lock_path(tmp_path, "cpu") == tmp_path / "cpu.lock"
    assert gpu_lock.lock_path(tmp_path, torch.device("cpu")) == tmp_path / "cpu.lock"


def test_the_same_gpu_seen_under_another_index_takes_the_same_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_cuda(monkeypatch, {0: UUIDS[1]})  # CUDA_VISIBLE_DEVICES=1: physical GPU 1 is cuda:0 here
    seen_alone = gpu_lock.lock_path(tmp_path, "cuda")
    fake_cuda(monkeypatch, UUIDS, current=1)  # all GPUs visible: the same GPU is cuda:1
    assert gpu_lock.lock_path(tmp_path, "cuda") == seen_alone


def test_without_a_uuid_the_pci_address_then_the_machine_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_cuda(monkeypatch, {0: ""})
    assert gpu_lock.lock_path(tmp_path, "cuda:0") == tmp_path / "gpu-pci-0000-1a-00.lock"

    def no_device(index: int) -> None:
        raise RuntimeError("CUDA driver initialization failed")

    monkeypatch.setattr(torch.cuda, "get_device_properties", no_device)
    assert gpu_lock.lock_path(tmp_path, "cuda:0") == tmp_path / gpu_lock.MACHINE_GPU_LOCK  # the safe side


# A helper process: sees one fake GPU (its UUID from argv) as cuda:0, waits until every helper is
# ready, holds its device lock for a moment and logs when it got and released it.
HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from types import SimpleNamespace
    import torch
    from pathlib import Path
    cache, uuid, name, log, count = sys.argv[1:6]
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_properties = lambda index: SimpleNamespace(uuid=uuid)
    from tools.worker import gpu_lock
    ready = Path(log).with_name("ready")
    ready.mkdir(exist_ok=True)
    (ready / name).touch()
    while len(list(ready.iterdir())) < int(count):  # every helper has imported torch: start together
        time.sleep(0.05)
    with gpu_lock.exclusive(gpu_lock.lock_path(cache, "cuda")):
        got = time.time()
        time.sleep(1.5)
        released = time.time()
    with open(log, "a") as fh:
        fh.write(json.dumps({"name": name, "got": got, "released": released}) + "\\n")
    """
)


def _hold_together(tmp_path: Path, uuids: list[str]) -> list[dict[str, float]]:
    tmp_path.mkdir()
    log = tmp_path / "log.jsonl"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(tmp_path / "cache"), uuid, f"w{i}", str(log), str(len(uuids))],
            cwd=REPO,
        )
        for i, uuid in enumerate(uuids)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * len(procs)
    return sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda e: e["got"])


@pytest.mark.slow
def test_workers_on_two_gpus_measure_at_once_and_on_one_gpu_take_turns(tmp_path: Path) -> None:
    first, second = _hold_together(tmp_path / "two", [UUIDS[0], UUIDS[1]])
    assert second["got"] < first["released"], "workers on different GPUs waited for each other"
    first, second = _hold_together(tmp_path / "one", [UUIDS[0], UUIDS[0]])
    assert second["got"] >= first["released"], "workers on the same GPU overlapped"


# A helper process that holds one of SLOTS baseline slots for a moment and logs when.
SLOT_HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from tools.worker import gpu_lock
    lock, name, log, count, slots = sys.argv[1:6]
    ready = Path(log).with_name("ready")
    ready.mkdir(exist_ok=True)
    (ready / name).touch()
    while len(list(ready.iterdir())) < int(count):
        time.sleep(0.05)
    with gpu_lock.slot(lock, int(slots)) as waited:
        got = time.time()
        time.sleep(1.0)
        released = time.time()
    with open(log, "a") as fh:
        fh.write(json.dumps({"name": name, "got": got, "released": released, "waited": waited}) + "\\n")
    """
)


@pytest.mark.slow
def test_slots_let_that_many_processes_hold_at_once_and_the_rest_wait(tmp_path: Path) -> None:
    log, lock = tmp_path / "log.jsonl", tmp_path / "locks" / "gpu-x.lock"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SLOT_HOLDER, str(lock), f"p{i}", str(log), "5", "2"], cwd=REPO
        )
        for i in range(5)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 5
    spans = [json.loads(line) for line in log.read_text().splitlines()]
    # at every moment some process got its slot, at most two held one
    for probe in spans:
        holding = [
            s for s in spans if s["got"] <= probe["got"] + 1e-3 and s["released"] > probe["got"] + 1e-3
        ]
        assert len(holding) <= 2, holding
    waited = sorted(s["waited"] for s in spans)
    assert waited[-1] >= 1.5  # the fifth waited for two rounds of holders
    assert sorted(p.name for p in lock.parent.iterdir()) == ["gpu-x.lock.slot0", "gpu-x.lock.slot1"]


def test_a_slot_count_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="count >= 1"), gpu_lock.slot(tmp_path / "x.lock", 0):
        pass
