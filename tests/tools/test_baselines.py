"""Baselines: cache keys, the JSON cache, eager and torch.compile timing in an isolated process (CPU).

On the CPU the numbers mean nothing; what is checked is the machinery: each mode is measured once and
then served from the cache, compilation stays out of the timed calls, a failing or slow mode does not
lose the modes already measured, and speedups are computed against eager and the best compile mode.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, has_cuda

from tools import baseline_cache, baselines

TINY = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x - 0.5) * self.scale


def get_inputs():
    return [torch.rand(64, 64)]


def get_init_inputs():
    return [2.0]
"""

# Eager (3 warm-ups + 3 timed + 1 discarded) and the reference output for the compile modes are
# cheap; every call after CALLS_BEFORE_HANG blocks, so a compile mode never finishes.
HANGS_WHEN_COMPILED = """
import time
import torch
import torch.nn as nn

CALLS_BEFORE_HANG = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > CALLS_BEFORE_HANG:
            time.sleep(600)
        return x * 2


def get_inputs():
    return [torch.rand(16)]


def get_init_inputs():
    return []
"""


# Runs out of "GPU memory" on the calls listed in OOM_CALLS (counted over the whole process): a stand-in
# for other processes holding the memory, which the baseline process answers by trying once more.
OOM_ON_CALLS = """
import torch
import torch.nn as nn

OOM_CALLS = {oom_calls}
calls = [0]


class Model(nn.Module):
    def forward(self, x):
        calls[0] += 1
        if calls[0] in OOM_CALLS or -1 in OOM_CALLS:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
        return x * 2


def get_inputs():
    return [torch.rand(16)]


def get_init_inputs():
    return []
"""


def cpu_request(cache: Path, **overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "problem_name": "tiny",
        "problem_source": TINY,
        "modes": ["eager"],
        "device": "cpu",
        "perf_trials": 5,
        "cache_dir": str(cache),
    }
    request.update(overrides)
    return request


# ----------------------------------------------------------------------------------------------
# Pure parts
# ----------------------------------------------------------------------------------------------


def test_timing_method_names_everything_that_changes_a_number() -> None:
    base = {"perf_trials": 100, "warmup": 3}
    method = baselines.timing_method(base)
    assert method.startswith("kernelbench@") and ":trials=100" in method and ":inputs=host" in method
    for change in (
        {"perf_trials": 30},
        {"warmup": 5},
        {"precision": "bf16"},
        {"seed": 7},
        {"mode": "strict"},
    ):
        assert baselines.timing_method({**base, **change}) != method, change
    # KernelBench mode always draws on the CPU, as the worker does; strict may draw on the device.
    assert baselines.timing_method({**base, "inputs_on_device": True}) == method
    assert ":inputs=device" in baselines.timing_method({**base, "mode": "strict", "inputs_on_device": True})


def test_best_compile_and_speedups_by_hand() -> None:
    response = {
        "baselines": {
            "eager": {"mean_ms": 4.0},
            "default": {"mean_ms": 2.5},
            "max-autotune-no-cudagraphs": {"error": "BackendCompilerFailed: x"},
            "reduce-overhead": {"mean_ms": 2.0},
        }
    }
    assert baselines.best_compile(response["baselines"]) == {"mode": "reduce-overhead", "mean_ms": 2.0}
    got = baselines.speedups(1.0, response)
    assert got["speedup_vs_eager"] == pytest.approx(4.0) and got["speedup_vs_compile"] == pytest.approx(2.0)
    assert got["best_compile_mode"] == "reduce-overhead" and got["baseline_eager_ms"] == 4.0
    assert baselines.speedups(None, response)["speedup_vs_eager"] is None
    assert baselines.speedups(1.0, {"baselines": {"eager": {"mean_ms": 3.0}}})["speedup_vs_compile"] is None
    assert baselines.best_compile({"eager": {"mean_ms": 1.0}}) is None  # eager is not a compile mode


def test_store_keeps_every_concurrent_writer(tmp_path: Path) -> None:
    path = tmp_path / baselines.CACHE_FILE

    def write(worker: int) -> None:
        for i in range(5):
            baselines.store(path, f"k{worker}-{i}", {"mean_ms": float(i)})

    threads = [threading.Thread(target=write, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = json.loads(path.read_text())
    assert len(data) == 30 and data["k5-4"] == {"mean_ms": 4.0}


def test_cache_key_has_device_torch_problem_mode_and_method() -> None:
    key = baselines.cache_key("NVIDIA H200", "2.11.0", baselines.problem_hash(TINY), "default", "m")
    assert key.split("|") == ["NVIDIA H200", "2.11.0", baselines.problem_hash(TINY), "default", "m"]
    assert baselines.problem_hash(TINY) != baselines.problem_hash(TINY + "\n")


# ----------------------------------------------------------------------------------------------
# The child's work, in this process (eager only: no compiler)
# ----------------------------------------------------------------------------------------------


def test_eager_is_measured_once_then_served_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = baselines.run_request(cpu_request(tmp_path))
    assert first["status"] == "passed", first["message"]
    eager = first["baselines"]["eager"]
    assert eager["cached"] is False and eager["trials"] == 5 and eager["mean_ms"] > 0
    assert first["device"].startswith("cpu:") and first["best_compile"] is None
    stored = json.loads((tmp_path / baselines.CACHE_FILE).read_text())
    assert len(stored) == 1 and next(iter(stored)).split("|")[3] == "eager"

    def must_not_load(request: dict[str, Any]) -> None:
        raise AssertionError("a cache hit must not execute the problem")

    monkeypatch.setattr(baselines, "_load", must_not_load)
    again = baselines.run_request(cpu_request(tmp_path))
    assert again["status"] == "passed" and again["baselines"]["eager"]["cached"] is True
    assert again["baselines"]["eager"]["mean_ms"] == eager["mean_ms"]
    # Another timing method is another key: measured again (and here, _load refuses).
    other = baselines.run_request(cpu_request(tmp_path, perf_trials=7))
    assert other["status"] == "runtime_error" and "AssertionError" in other["message"]


@pytest.mark.parametrize(
    ("override", "status", "words"),
    [
        ({"modes": ["eager", "jit"]}, "runtime_error", "unknown mode"),
        ({"device": "tpu"}, "runtime_error", "unknown device"),
        ({"precision": "fp8"}, "runtime_error", "unknown precision"),
        ({"mode": "loose"}, "runtime_error", "unknown mode"),
        ({"problem_source": "import torch\n"}, "runtime_error", "missing Model"),
    ],
)
def test_bad_requests_are_answered_not_raised(
    tmp_path: Path, override: dict, status: str, words: str
) -> None:
    answer = baselines.run_request(cpu_request(tmp_path, **override))
    assert answer["status"] == status and words in answer["message"]


def test_a_mode_that_ran_out_of_memory_is_tried_once_more(tmp_path: Path) -> None:
    once = baselines.run_request(cpu_request(tmp_path, problem_source=OOM_ON_CALLS.format(oom_calls={2})))
    assert once["status"] == "passed", once["message"]
    assert (
        once["baselines"]["eager"]["retried_after_oom"] is True and once["baselines"]["eager"]["trials"] == 5
    )
    always = baselines.run_request(
        cpu_request(tmp_path / "b", problem_source=OOM_ON_CALLS.format(oom_calls={-1}))
    )
    entry = always["baselines"]["eager"]
    assert "out of memory" in entry["error"] and entry["retried_after_oom"] is True
    assert "failed: eager" in always["message"]


def test_out_of_memory_is_told_from_other_failures() -> None:
    import torch

    assert baselines.out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory."))
    wrapped = RuntimeError("BackendCompilerFailed: backend='inductor' raised:\nCUDA out of memory. Tried")
    assert baselines.out_of_memory(wrapped)
    assert not baselines.out_of_memory(RuntimeError("shape mismatch"))


def test_slots_come_from_the_environment_with_a_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(baselines.SLOTS_ENV, raising=False)
    assert baselines.baseline_slots() == baselines.DEFAULT_SLOTS
    monkeypatch.setenv(baselines.SLOTS_ENV, "0")
    assert baselines.baseline_slots() == 0
    for bad in ("two", "-1"):
        monkeypatch.setenv(baselines.SLOTS_ENV, bad)
        with pytest.raises(ValueError, match=baselines.SLOTS_ENV):
            baselines.baseline_slots()


@pytest.mark.skipif(has_cuda(), reason="checks the no-GPU answer")
def test_cuda_without_a_gpu_is_no_gpu(tmp_path: Path) -> None:
    answer = baselines.run_request(cpu_request(tmp_path, device="cuda"))
    assert answer["status"] == "no_gpu" and answer["baselines"] == {}


# ----------------------------------------------------------------------------------------------
# The isolated process, with the compiler
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_compile_mode_is_timed_apart_from_its_compilation(tmp_path: Path) -> None:
    answer = baselines.measure_baselines(
        TINY,
        "tiny",
        modes=["eager", "default"],
        device="cpu",
        perf_trials=5,
        cache_dir=tmp_path,
        timeout_s=600,
    )
    assert answer["status"] == "passed", answer["message"]
    compiled = answer["baselines"]["default"]
    assert compiled["cached"] is False and compiled["trials"] == 5
    assert compiled["compile_s"] > 0 and compiled["max_abs_diff_vs_eager"] == 0.0
    # The timed calls do not include compilation (seconds of it) nor recompile.
    assert compiled["max_ms"] < compiled["compile_s"] * 1000 / 4
    assert answer["best_compile"]["mode"] == "default"
    again = baselines.measure_baselines(
        TINY,
        "tiny",
        modes=["eager", "default"],
        device="cpu",
        perf_trials=5,
        cache_dir=tmp_path,
        timeout_s=600,
    )
    assert all(entry["cached"] for entry in again["baselines"].values())
    assert again["baselines"]["default"]["mean_ms"] == compiled["mean_ms"]
    assert again["wall_s"] < answer["wall_s"]


@pytest.mark.slow
def test_timeout_keeps_the_modes_already_measured(tmp_path: Path) -> None:
    answer = baselines.measure_baselines(
        HANGS_WHEN_COMPILED, "hang", modes=["eager", "default"], device="cpu", perf_trials=3,
        cache_dir=tmp_path, timeout_s=45,
    )  # fmt: skip
    assert answer["status"] == "timeout" and "timed out after 45" in answer["message"]
    assert answer["baselines"]["eager"]["trials"] == 3 and "default" not in answer["baselines"]
    stored = json.loads((tmp_path / baselines.CACHE_FILE).read_text())
    assert [key.split("|")[3] for key in stored] == ["eager"]


@pytest.mark.slow
def test_suite_command_prints_a_table_and_writes_records(tmp_path: Path) -> None:
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    (suite / "1_Tiny.py").write_text(TINY)
    (suite / "2_Double.py").write_text(
        HANGS_WHEN_COMPILED.replace("CALLS_BEFORE_HANG = 8", "CALLS_BEFORE_HANG = 99")
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tools.baselines", "--suite", str(suite.parent), "--modes", "eager",
         "--device", "cpu", "--perf-trials", "3", "--out", str(out), "--cache-dir", str(tmp_path / "cache")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("| problem | status | eager ms |")
    assert any(line.startswith("| level1/1_Tiny | passed |") for line in lines)
    records = [json.loads(line) for line in (out / "baselines.jsonl").read_text().splitlines()]
    assert [r["problem"] for r in records] == ["level1/1_Tiny", "level1/2_Double"]
    assert all(r["baselines"]["eager"]["mean_ms"] > 0 for r in records)


def test_timing_takes_the_workers_device_lock_wherever_the_cache_file_lives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A baseline cache outside the build cache (the suite's $STITCHCUDA_BASELINE_CACHE) must not move
    the device lock: with the lock beside the cache file, a worker's correctness trials ran on the GPU
    during a baseline's timing (an H200 suite's eager rounds 1.5x slower until they ended)."""
    from tools.worker import gpu_lock

    monkeypatch.setenv(baseline_cache.CACHE_ENV, str(tmp_path / "elsewhere" / "baselines.json"))
    answers: list[dict[str, Any]] = []
    with gpu_lock.exclusive(gpu_lock.lock_path(tmp_path, "cpu")):  # a worker holds the device
        timing = threading.Thread(target=lambda: answers.append(baselines.run_request(cpu_request(tmp_path))))
        timing.start()
        timing.join(timeout=3.0)
        assert timing.is_alive() and not answers, "the baseline timed while a worker held the device"
    timing.join(timeout=60.0)
    assert answers and answers[0]["status"] == "passed", answers
    assert (tmp_path / "elsewhere" / "baselines.json").is_file()
