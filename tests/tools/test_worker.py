"""The evaluation worker end to end: real subprocesses, real g++/nvcc builds, C++-only candidates on CPU.

Every candidate that builds uses the same extension source (tests/candidates/worker/affine_*.py), so
one cold build (~8-10 s on 2 cores) serves the whole module through the build cache.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tools import build
from tools.evaluate import CappedLog, evaluate
from tools.protocol import EvalRequest
from tools.worker import correctness, timing, torch_profile
from tools.worker import entry as worker

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "tests" / "candidates" / "worker"
RELU_SOLUTION = REPO / "docs" / "examples" / "relu_solution.py"


def source(name: str) -> str:
    return (CANDIDATES / name).read_text()


def cpu_request(candidate: str, cache_dir: Path, **overrides: Any) -> EvalRequest:
    request = EvalRequest(
        action="verify",
        problem_name="affine",
        problem_source=source("affine_problem.py"),
        candidate_source=source(candidate),
        device="cpu",
        perf_trials=20,
        cache_dir=str(cache_dir),
    )
    request.update(overrides)  # type: ignore[typeddict-item]
    return request


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("worker-build-cache")


@pytest.fixture(scope="module")
def first_run(cache_dir: Path) -> dict[str, Any]:
    """The correct candidate, verified once against a cold cache (the module's only C++ build)."""
    return dict(evaluate(cpu_request("affine_ok.py", cache_dir), timeout_s=300))


# ----------------------------------------------------------------------------------------------
# Statuses, through real worker processes
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_correct_candidate_passes_with_timings(first_run: dict[str, Any]) -> None:
    assert first_run["status"] == "passed", first_run["message"]
    assert first_run["device"] == "cpu"
    assert first_run["build"]["ok"] and not first_run["build"]["cached"]
    assert first_run["build"]["extensions"][0].startswith("stitch_affine_test_")
    assert first_run["correctness"]["trials"] == first_run["correctness"]["passed"] == 5
    timing_info = first_run["timing"]
    assert timing_info["candidate"]["trials"] == 20 and timing_info["eager"]["trials"] == 20
    assert (
        0
        < timing_info["candidate"]["min_ms"]
        <= timing_info["candidate_ms"]
        <= timing_info["candidate"]["max_ms"]
    )
    assert timing_info["eager_ms"] > 0
    assert "correct on 5 trials" in first_run["message"]


@pytest.mark.slow
def test_second_identical_build_is_a_cache_hit(first_run: dict[str, Any], cache_dir: Path) -> None:
    again = evaluate(cpu_request("affine_ok.py", cache_dir, action="build"), timeout_s=120)
    assert again["status"] == "passed", again["message"]
    assert again["build"]["cached"] is True
    assert again["build"]["seconds"] < min(2.0, first_run["build"]["seconds"] / 4)
    assert again["build"]["extensions"] == first_run["build"]["extensions"]


@pytest.mark.slow
def test_wrong_result_is_wrong_output_with_its_error(first_run: dict[str, Any], cache_dir: Path) -> None:
    response = evaluate(cpu_request("affine_wrong.py", cache_dir), timeout_s=120)
    assert response["status"] == "wrong_output", response["message"]
    assert response["build"]["cached"] is True
    check = response["correctness"]
    assert check["passed"] < check["trials"] == 5
    assert check["max_abs_err"] == pytest.approx(0.5, abs=1e-6)  # the missing bias
    assert check["where"].startswith("[63, ")  # the last row
    assert "timing" not in response


@pytest.mark.slow
def test_forward_that_raises_is_runtime_error(first_run: dict[str, Any], cache_dir: Path) -> None:
    response = evaluate(cpu_request("affine_raises.py", cache_dir), timeout_s=120)
    assert response["status"] == "runtime_error"
    assert "ModelNew.forward raised on correctness trial 1" in response["message"]
    assert "ValueError: affine: negative size" in response["message"]
    assert "candidate.py:" in response["message"]  # the candidate's own line, not torch's


@pytest.mark.slow
def test_profile_on_cpu_summarises_ops(first_run: dict[str, Any], cache_dir: Path) -> None:
    response = evaluate(
        cpu_request("affine_ok.py", cache_dir, action="profile", profile_reference=True), timeout_s=120
    )
    assert response["status"] == "passed", response["message"]
    info = response["profile"]
    assert info["events"] == "cpu_ops" and info["device_ms"] > 0
    assert 0 < info["own_kernel_share"] <= 1
    assert {"aten::mul", "aten::add"} <= {row["name"] for row in info["reference"]["top"]}
    assert info["reference"]["own_kernel_share"] == 0


@pytest.mark.slow
def test_compile_error_is_build_error_with_the_line(cache_dir: Path) -> None:
    response = evaluate(cpu_request("compile_error.py", cache_dir), timeout_s=180)
    assert response["status"] == "build_error"
    errors = response["build"]["errors"]
    assert not response["build"]["ok"] and errors
    assert errors[0].startswith("cpp_sources:8:") and "error:" in errors[0] and "yq" in errors[0]
    assert "yq" in response["message"]
    assert not list(cache_dir.glob(".tmp-*"))  # the failed build left nothing behind


def test_swallowed_build_failure_is_still_build_error(tmp_path: Path) -> None:
    response = evaluate(cpu_request("swallowed_build_error.py", tmp_path), timeout_s=120)
    assert response["status"] == "build_error"
    assert "--no-such-flag" in response["build"]["errors"][0]


def test_infinite_loop_times_out_within_the_limit(tmp_path: Path) -> None:
    started = time.monotonic()
    response = evaluate(cpu_request("hang.py", tmp_path), timeout_s=12)
    assert response["status"] == "timeout"
    assert time.monotonic() - started < 12 + 5
    assert "timed out after 12 s while checking correctness" in response["message"]


def test_abort_is_crashed_with_the_signal(tmp_path: Path) -> None:
    response = evaluate(cpu_request("abort.py", tmp_path), timeout_s=60)
    assert response["status"] == "crashed"
    assert "SIGABRT" in response["message"] and "checking correctness" in response["message"]


def test_segfault_is_crashed_with_the_traceback(tmp_path: Path) -> None:
    response = evaluate(cpu_request("segfault.py", tmp_path), timeout_s=60)
    assert response["status"] == "crashed"
    assert "SIGSEGV" in response["message"]
    assert "Segmentation fault" in response["stdout_tail"]  # faulthandler's report
    assert "candidate.py" in response["stdout_tail"]


def _processes_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_timeout_during_a_build_names_it_and_kills_the_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = "987.654321"
    compiler = tmp_path / "stuck-c++"
    compiler.write_text(f"#!/bin/sh\nexec sleep {marker}\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    response = evaluate(cpu_request("affine_ok.py", tmp_path / "cache"), timeout_s=12)
    assert response["status"] == "timeout"
    assert "while building extension 'stitch_affine_test'" in response["message"]
    time.sleep(0.5)
    assert _processes_with(marker) == []  # the whole process group went down


def test_candidate_output_is_capped(tmp_path: Path) -> None:
    response = evaluate(
        cpu_request("noisy.py", tmp_path, action="build"), timeout_s=120, log_path=tmp_path / "log"
    )
    assert response["status"] == "passed"
    tail = response["stdout_tail"]
    assert len(tail) < 4200 and "bytes before" in tail
    assert "last words from the candidate" in tail
    assert (tmp_path / "log").stat().st_size < 1.1 * (1 << 20)


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer on a machine without a GPU")
def test_cuda_candidate_without_gpu_builds_with_nvcc_then_no_gpu(tmp_path: Path) -> None:
    request = EvalRequest(
        action="verify",
        problem_name="relu",
        problem_source=source("relu_problem.py"),
        candidate_source=RELU_SOLUTION.read_text(),
        device="cuda",
        arch="sm_90",
        cache_dir=str(tmp_path),
    )
    response = evaluate(request, timeout_s=400)
    assert response["status"] == "no_gpu", response["message"]
    assert response["build"]["ok"] and not response["build"]["cached"]
    assert response["build"]["kernels"] == ["relu_f4", "relu_tail"]
    assert list(tmp_path.glob("*/stitch_relu_example_*.so"))


def test_worker_reads_stdin_and_answers_on_stdout(tmp_path: Path) -> None:
    import json
    import subprocess

    request = cpu_request("noisy.py", tmp_path, action="build")
    done = subprocess.run(
        [sys.executable, "-m", "tools.worker"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    answer = json.loads(done.stdout)  # the candidate's 5 MB of prints went to stderr
    assert answer["status"] == "passed" and answer["build"]["extensions"] == []
    assert "debug line 049999" in done.stderr


# ----------------------------------------------------------------------------------------------
# The worker's steps, in this process (no builds)
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Undo what a worker run changes in its process: the patched loaders, TF32 flags, the module."""
    ce = build.cpp_extension()
    monkeypatch.setattr(ce, "load_inline", ce.load_inline)
    monkeypatch.setattr(ce, "load", ce.load)
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
    sys.modules.pop("stitch_candidate", None)


def test_run_request_passes_a_pytorch_candidate(in_process: None, tmp_path: Path) -> None:
    response = worker.run_request(cpu_request("torch_ok.py", tmp_path, perf_trials=5, mode="strict"))
    assert response["status"] == "passed", response["message"]
    assert response["build"] == {
        "ok": True,
        "seconds": 0.0,
        "cached": False,
        "errors": [],
        "log_tail": "",
        "extensions": [],
        "kernels": [],
    }
    assert response["timing"]["candidate"]["trials"] == 5


def test_candidate_that_turns_on_tf32_is_rejected(in_process: None, tmp_path: Path) -> None:
    response = worker.run_request(cpu_request("tf32_switch.py", tmp_path))
    assert response["status"] == "runtime_error"
    assert "torch.backends.cuda.matmul.allow_tf32" in response["message"]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"action": "compile"}, "unknown action 'compile'"),
        ({"device": "tpu"}, "unknown device 'tpu'"),
        ({"arch": "sm90x"}, "unknown CUDA arch 'sm90x'"),
        ({"candidate_source": ""}, "no candidate_source"),
        ({"problem_source": "x = 1\n"}, "missing Model, get_inputs, get_init_inputs"),
        ({"candidate_source": "class ModelNew(:\n"}, "candidate.py: syntax error at line 1"),
    ],
)
def test_bad_requests_get_one_line_errors(
    in_process: None, tmp_path: Path, overrides: dict[str, Any], expected: str
) -> None:
    response = worker.run_request(cpu_request("torch_ok.py", tmp_path, **overrides))
    assert response["status"] == "runtime_error"
    assert expected in response["message"]


# ----------------------------------------------------------------------------------------------
# Correctness, timing, profiling and the log, as units
# ----------------------------------------------------------------------------------------------


def test_trial_seeds_follow_kernelbench() -> None:
    torch.manual_seed(42)
    expected = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(5)]
    assert correctness.trial_seeds(5, 42) == expected
    assert len(set(expected)) == 5


def test_prepare_inputs_keeps_integers_and_casts_floats() -> None:
    ints, doubles, mask = torch.arange(4), torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.bool)
    out = correctness.prepare_inputs([ints, doubles, mask, 3], "cpu")
    assert [t.dtype for t in out[:3]] == [torch.int64, torch.float32, torch.bool]
    assert out[3] == 3


def test_compare_reports_the_worst_element_and_problems() -> None:
    ref = torch.zeros(3, 4)
    new = ref.clone()
    new[2, 1] = 1e-3
    result = correctness.compare_tensors(ref, new, 1e-4, 1e-4)
    assert not result.ok and result.where == "[2, 1]"
    assert result.max_abs_err == pytest.approx(1e-3) and result.max_rel_err == pytest.approx(10.0, rel=1e-3)
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert not correctness.compare_tensors(nan, nan.clone(), 1e-4, 1e-4).ok  # like KernelBench
    assert "shape mismatch" in correctness.compare_tensors(ref, ref.T, 1e-4, 1e-4).problem
    assert "dtype mismatch" in correctness.compare_tensors(ref, ref.double(), 1e-4, 1e-4).problem
    pair = correctness.compare_outputs((ref, ref), (ref, new), 1e-4, 1e-4)
    assert not pair.ok and pair.where == "output[1][2, 1]"


class _Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class _ScaleThenZeroInput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        x.zero_()  # would corrupt a shared input
        return y


class _RightThenWrong(torch.nn.Module):
    """Answers correctly on odd calls only: passes one call per trial, not two."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * 2 if self.calls % 2 else x * 3


def test_check_correctness_clones_inputs_and_strict_catches_nondeterminism() -> None:
    def get_inputs() -> list[torch.Tensor]:
        return [torch.rand(8, 8)]

    report = correctness.check_correctness(
        _Scale(), _ScaleThenZeroInput(), get_inputs, "cpu", trials=3, strict=True
    )
    assert report.ok and report.passed == 3
    assert correctness.check_correctness(_Scale(), _RightThenWrong(), get_inputs, "cpu", trials=1).ok
    strict = correctness.check_correctness(
        _Scale(), _RightThenWrong(), get_inputs, "cpu", trials=1, strict=True
    )
    assert not strict.ok and "two calls on the same inputs gave different outputs" in strict.message
    with pytest.raises(correctness.ForwardError, match="ModelNew.forward raised on correctness trial 1"):
        correctness.check_correctness(_Scale(), torch.nn.Flatten(start_dim=5), get_inputs, "cpu", trials=1)


def test_timing_stats_and_budget() -> None:
    stats = timing.timing_stats([1.0, 2.0, 3.0])
    assert stats == {"mean_ms": 2.0, "median_ms": 2.0, "std_ms": pytest.approx(0.816497), "min_ms": 1.0,
                     "max_ms": 3.0, "trials": 3}  # fmt: skip
    x = torch.rand(4)
    full = timing.time_forward(_Scale(), [x], "cpu", warmup=1, trials=7)
    assert full["trials"] == 7 and full["min_ms"] > 0

    def slow(t: torch.Tensor) -> torch.Tensor:
        time.sleep(0.05)
        return t

    cut = timing.time_forward(slow, [x], "cpu", warmup=0, trials=100, budget_s=0.2)
    assert 1 <= cut["trials"] <= 5


def test_kernel_base_names_match_global_declarations() -> None:
    assert torch_profile.kernel_base_name("relu_f4(float4 const*, float4*, long)") == "relu_f4"
    assert torch_profile.kernel_base_name("void ns::gemm<128, 64>(float const*, float*)") == "gemm"
    assert (
        torch_profile.kernel_base_name("void (anonymous namespace)::softmax_warp<float>(float*)")
        == "softmax_warp"
    )
    assert torch_profile.kernel_base_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD"


def _device_event(name: str, start_us: float, end_us: float) -> Any:
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    return FunctionEvent(
        id=1, name=name, thread=0, start_us=start_us, end_us=end_us, device_type=DeviceType.CUDA
    )


def test_cuda_summary_splits_own_and_library_kernels() -> None:
    events = [
        _device_event("relu_f4(float4 const*, float4*, long)", 0, 30),
        _device_event("relu_f4(float4 const*, float4*, long)", 40, 70),
        _device_event("void at::native::vectorized_elementwise_kernel<4>(int)", 70, 100),
        _device_event("Memset (Device)", 100, 110),
    ]
    summary = torch_profile.summarize_cuda(events, {"relu_f4", "relu_tail"}, iters=2, top_k=5)
    assert summary["device_ms"] == pytest.approx(0.05)
    assert summary["kernel_count"] == 2  # 3 launches over 2 forwards, the memset not counted
    assert summary["own_kernel_share"] == pytest.approx(0.6)
    assert summary["top"][0]["name"].startswith("relu_f4") and summary["top"][0]["calls"] == 2


def test_capped_log_keeps_head_on_disk_and_tail_in_memory(tmp_path: Path) -> None:
    log = CappedLog(tmp_path / "out.log", head_bytes=1000, tail_bytes=300)
    for i in range(500):
        log.write(f"line {i:04d}\n".encode())
    log.close()
    head = (tmp_path / "out.log").read_text()
    assert head.startswith("line 0000") and "more bytes not kept" in head
    assert len(head) < 1100
    tail = log.tail_text(100)
    assert tail.endswith("line 0499\n") and "bytes before" in tail


def test_evaluate_never_raises_for_a_missing_interpreter(tmp_path: Path) -> None:
    response = evaluate(cpu_request("torch_ok.py", tmp_path), timeout_s=30, python=os.devnull)
    assert response["status"] == "crashed"
