"""Side-by-side timing on a real GPU: the worker interleaves candidate and eager in strict and
KernelBench mode, every compile mode is timed beside eager, and the Ray executor runs a problem as
a one-GPU task (skips without CUDA; the Ray test also without ray)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from tools import baselines
from tools.evaluate import evaluate
from tools.protocol import EvalRequest

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

REPO = Path(__file__).resolve().parents[2]
PROBLEM = (REPO / "tests" / "candidates" / "worker" / "relu_problem.py").read_text()
SOLUTION = (REPO / "docs" / "examples" / "relu_solution.py").read_text()


@pytest.mark.parametrize("mode", ["strict", "kernelbench"])
def test_candidate_and_eager_alternate_on_the_gpu(mode: str, tmp_path: Path) -> None:
    request = EvalRequest(
        action="verify",
        problem_name="19_ReLU",
        problem_source=PROBLEM,
        candidate_source=SOLUTION,
        device="cuda",
        mode=mode,  # type: ignore[typeddict-item]
        perf_trials=40,
        timing_rounds=8,
        cache_dir=str(tmp_path),
    )
    response = evaluate(request, timeout_s=600)
    assert response["status"] == "passed", response["message"]
    info = response["timing"]
    assert info["order"] == ["candidate", "eager"] * 8
    for key in ("candidate", "eager"):
        assert info[key]["rounds"] == 8 and info[key]["trials"] == 40 and info[key]["cv"] >= 0
    print(f"{mode}: candidate {info['candidate_ms']:.4f} ms (cv {info['candidate']['cv']:.3f}), eager "
          f"{info['eager_ms']:.4f} ms (cv {info['eager']['cv']:.3f}), ratio {info['ratios']['eager']}")  # fmt: skip


def test_every_compile_mode_beside_eager_on_the_gpu(tmp_path: Path) -> None:
    answer = baselines.measure_baselines(
        PROBLEM, "19_ReLU", perf_trials=20, cache_dir=tmp_path, timeout_s=900
    )
    assert answer["status"] == "passed", answer["message"]
    for mode in baselines.MODES[1:]:
        entry = answer["baselines"][mode]
        assert entry["order"] == ["eager", mode] * entry["rounds"], entry
        print(f"{mode}: {entry['mean_ms']:.4f} ms beside eager {entry['eager_side_by_side_ms']:.4f} ms "
              f"(compile {entry['compile_s']:.1f} s, ratio {entry['ratio_vs_eager']})")  # fmt: skip


def test_ray_runs_a_problem_as_a_one_gpu_task(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from evals import runner
    from evals.ray_executor import RayOptions

    problem = tmp_path / "suite" / "level1" / "19_ReLU.py"
    problem.parent.mkdir(parents=True)
    problem.write_text(PROBLEM)
    records = runner.run_suite(
        runner.discover([str(tmp_path / "suite")]),
        tmp_path / "out",
        ["--max-iterations", "1", "--perf-trials", "20"],
        baseline=runner.BaselineConfig(enabled=True, modes=("eager",), cache_dir=str(tmp_path / "cache")),
        cli=(sys.executable, "-m", "graph.cli"),
        ray=RayOptions(),
    )
    (record,) = records
    assert record["executor"] == "ray" and record["gpu"] == "0" and record["device"].startswith("NVIDIA")
    print({k: record.get(k) for k in ("status", "speedup_vs_eager", "eager_agreement", "breakdown")})


def test_after_a_context_fault_the_probe_passes_and_each_gpu_has_its_own_lock(tmp_path: Path) -> None:
    """Issue 15: a kernel that corrupts its context fails its worker; a fresh process still gets a
    working GPU (the eval's health probe passes, so the failure stays the problem's own); the device
    lock is named by each GPU's UUID."""
    from evals import gpu_health
    from tools.worker import gpu_lock

    faults = REPO / "tests" / "candidates" / "adversarial"
    request = EvalRequest(
        action="verify",
        problem_name="relu",
        problem_source=(faults / "problems" / "relu.py").read_text(),
        candidate_source=(faults / "faults" / "illegal_address.py").read_text(),
        device="cuda",
        mode="strict",
        perf_trials=10,
        dynamic_checks=False,
        cache_dir=str(tmp_path),
    )
    response = evaluate(request, timeout_s=300)
    assert response["status"] in ("runtime_error", "crashed"), response["message"]
    probe = gpu_health.run_probe()
    assert probe.ok and probe.devices and all(d["ok"] for d in probe.devices), probe
    names = {gpu_lock.lock_path(tmp_path, f"cuda:{i}").name for i in range(torch.cuda.device_count())}
    assert len(names) == torch.cuda.device_count()  # one lock per GPU
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    assert gpu_lock.lock_path(tmp_path, "cuda:0").name == f"gpu-{gpu_lock._slug(uuid)}.lock"
    assert probe.devices[0]["uuid"] == uuid
    print(f"{response['status']}: {response['message'][:120]}; probe {probe.seconds} s, lock {sorted(names)}")
