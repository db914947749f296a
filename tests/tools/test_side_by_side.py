"""The worker and the baseline process time side by side, inside the quiet window (CPU, real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO
from support.worker_requests import affine_request, worker_candidate

from tools import baselines
from tools.evaluate import evaluate
from tools.worker import timing_window

HOLD_UNTIL_RELEASED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tools.worker import timing_window

    folder, started, release = sys.argv[1:4]
    with timing_window.busy(folder):
        Path(started).write_text("in")
        deadline = time.monotonic() + 120
        while not Path(release).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    """
)


@pytest.fixture(autouse=True)
def _window_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(timing_window.WINDOW_ENV, raising=False)


def test_worker_interleaves_candidate_and_eager(tmp_path: Path) -> None:
    request = affine_request(worker_candidate("torch_ok.py"), tmp_path, perf_trials=12, timing_rounds=4)
    response = evaluate(request, timeout_s=300)
    assert response["status"] == "passed", response["message"]
    info = response["timing"]
    assert info["order"] == ["candidate", "eager"] * 4 and info["rounds"] == 4
    for key in ("candidate", "eager"):
        assert info[key]["rounds"] == 4 and info[key]["trials"] == 12 and "cv" in info[key]
        assert info[key]["median_ms"] > 0
    assert info["ratios"]["eager"]["rounds"] == 4
    assert info["candidate_ms"] == info["candidate"]["mean_ms"]


def test_worker_timing_waits_for_a_build_of_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = tmp_path / "started", tmp_path / "release"
    workers = tmp_path / "tmp"
    workers.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(workers))  # the worker's folder: only ours to watch
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_UNTIL_RELEASED, str(tmp_path), str(started), str(release)], env=env
    )
    try:
        while not started.exists():
            assert holder.poll() is None, "the build holder died"
            time.sleep(0.05)

        def release_when_worker_waits() -> None:
            """The build ends once the worker is waiting for the window (its progress file says so)."""
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                for progress in workers.glob("stitch-eval-*/progress.json"):
                    if "waiting for the timing window" in progress.read_text(errors="replace"):
                        release.write_text("go")
                        return
                time.sleep(0.05)
            release.write_text("gave up")

        watcher = threading.Thread(target=release_when_worker_waits, daemon=True)
        watcher.start()
        response = evaluate(affine_request(worker_candidate("torch_ok.py"), tmp_path), timeout_s=300)
        watcher.join(timeout=5)
    finally:
        release.write_text("go")
        holder.wait(timeout=60)
    assert release.read_text() == "go"  # the worker was seen waiting for the window
    assert response["status"] == "passed", response["message"]
    assert response["timing"]["window_wait_s"] > 0


@pytest.mark.slow
def test_baselines_time_each_compile_mode_beside_eager(tmp_path: Path) -> None:
    source = (REPO / "tests" / "candidates" / "worker" / "affine_problem.py").read_text()
    answer = baselines.measure_baselines(
        source,
        "affine",
        modes=("eager", "default"),
        device="cpu",
        perf_trials=6,
        cache_dir=tmp_path,
        timeout_s=600,
    )
    assert answer["status"] == "passed", answer["message"]
    eager, compiled = answer["baselines"]["eager"], answer["baselines"]["default"]
    assert eager["order"] == ["eager"] * eager["rounds"]
    assert compiled["order"] == ["eager", "default"] * compiled["rounds"]
    assert (
        compiled["eager_side_by_side_ms"] > 0 and compiled["ratio_vs_eager"]["rounds"] == compiled["rounds"]
    )
    assert compiled["compile_s"] > 0 and "cv" in compiled


def test_a_moved_window_and_a_shared_baseline_cache_work_inside_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window, shared = tmp_path / "machine-window", tmp_path / "shared" / "kind-h200.json"
    monkeypatch.setenv(timing_window.WINDOW_ENV, str(window))
    monkeypatch.setenv("STITCHCUDA_BASELINE_CACHE", str(shared))
    response = evaluate(affine_request(worker_candidate("torch_ok.py"), tmp_path / "cache"), timeout_s=300)
    assert response["status"] == "passed", response["message"]
    assert (window / timing_window.WINDOW_FILE).exists()
    source = (REPO / "tests" / "candidates" / "worker" / "affine_problem.py").read_text()
    first = baselines.measure_baselines(
        source, "affine", modes=("eager",), device="cpu", perf_trials=4, cache_dir=tmp_path / "cache"
    )
    assert first["status"] == "passed", first["message"]
    assert shared.exists() and first["baselines"]["eager"]["cached"] is False
    again = baselines.measure_baselines(  # another build cache, same kind of machine: the shared file answers
        source, "affine", modes=("eager",), device="cpu", perf_trials=4, cache_dir=tmp_path / "other-cache"
    )
    assert again["baselines"]["eager"]["cached"] is True


def test_a_programs_first_call_runs_in_the_quiet_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call where a program times its own choices (cuDNN's algorithm search) runs quietly; the
    candidate answers wrong on every later call if its first found the window open. Strict mode only:
    KernelBench mode calls a program exactly as KernelBench does."""
    monkeypatch.setenv(timing_window.WINDOW_ENV, str(tmp_path / "window"))
    request = affine_request(
        worker_candidate("quiet_first_call.py"), tmp_path / "cache", perf_trials=4, mode="strict"
    )
    response = evaluate(request, timeout_s=300)
    assert response["status"] == "passed", response["message"]


@pytest.mark.slow
def test_an_autotuning_mode_compiles_holding_the_device_and_older_entries_are_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """max-autotune times kernels while it compiles: a baseline compiles it under the device's lock, and
    a cached entry from before (no `compiled_alone`) does not answer."""
    monkeypatch.delenv("STITCHCUDA_BASELINE_CACHE", raising=False)
    source = (REPO / "tests" / "candidates" / "worker" / "affine_problem.py").read_text()
    eager = baselines.measure_baselines(
        source, "affine", modes=("eager",), device="cpu", perf_trials=4, cache_dir=tmp_path
    )
    assert eager["status"] == "passed", eager["message"]
    path = tmp_path / "baselines.json"
    cached = json.loads(path.read_text())
    (key,) = cached
    mode = "max-autotune-no-cudagraphs"
    cached[key.replace("|eager|", f"|{mode}|")] = {**cached[key], "mode": mode}  # as older runs stored it
    path.write_text(json.dumps(cached))
    answer = baselines.measure_baselines(
        source,
        "affine",
        modes=("eager", mode),
        device="cpu",
        perf_trials=4,
        cache_dir=tmp_path,
        timeout_s=600,
    )
    assert answer["status"] == "passed", answer["message"]
    assert answer["baselines"]["eager"]["cached"] is True
    tuned = answer["baselines"][mode]
    assert tuned["cached"] is False and tuned["compiled_alone"] is True and tuned["compile_s"] > 0


@pytest.mark.slow
def test_worker_times_requested_compile_modes_in_the_same_rounds(tmp_path: Path) -> None:
    request = affine_request(
        worker_candidate("torch_ok.py"), tmp_path, perf_trials=6, timing_rounds=3, compile_modes=["default"]
    )
    response = evaluate(request, timeout_s=600)
    assert response["status"] == "passed", response["message"]
    info = response["timing"]
    assert info["order"] == ["candidate", "eager", "default"] * 3
    assert info["compile_ms"]["default"] == info["default"]["mean_ms"] > 0
    assert info["default"]["compile_s"] > 0 and info["ratios"]["default"]["rounds"] == 3
    bad = evaluate(affine_request(worker_candidate("torch_ok.py"), tmp_path, compile_modes=["fastest"]))
    assert bad["status"] == "runtime_error" and "unknown compile mode" in bad["message"]
