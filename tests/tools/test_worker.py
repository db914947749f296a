"""The evaluation worker: real subprocesses, real g++/nvcc builds, C++-only candidates on CPU, and in-process runs.

Every candidate that builds uses the same extension source (tests/candidates/worker/affine_*.py), so
one cold build (~8-10 s on 2 cores) serves the whole module through the build cache.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from support.worker_requests import affine_request, worker_candidate

from tools import build
from tools.evaluate import evaluate, speed_of_light_findings
from tools.protocol import EvalRequest
from tools.worker import entry as worker
from tools.worker.guards import snapshot_guards

REPO = Path(__file__).resolve().parents[2]
RELU_SOLUTION = REPO / "docs" / "examples" / "relu_solution.py"


def cpu_request(candidate: str, cache_dir: Path, /, **overrides: Any) -> EvalRequest:
    """A request for tests/candidates/worker/<candidate>."""
    return affine_request(worker_candidate(candidate), cache_dir, **overrides)


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Undo what a worker run changes in its process: the patched loaders, precision flags, the module."""
    ce = build.cpp_extension()
    monkeypatch.setattr(ce, "load_inline", ce.load_inline)
    monkeypatch.setattr(ce, "load", ce.load)
    saved = snapshot_guards()
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved["torch.backends.cuda.matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = saved["torch.backends.cudnn.allow_tf32"]
    torch.set_float32_matmul_precision(saved["torch.get_float32_matmul_precision()"])
    sys.modules.pop("stitch_candidate", None)


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
        problem_source=worker_candidate("relu_problem.py"),
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


def test_worker_strict_and_kernelbench_responses(in_process: None, tmp_path: Path) -> None:
    source = worker_candidate("torch_ok.py")
    strict = worker.run_request(affine_request(source, tmp_path, mode="strict", timing_input_sets=3))
    assert strict["status"] == "passed", strict["message"]
    # excessive_speedup (info) is a timing observation: on a loaded CPU one side can be slowed 20x.
    assert [f for f in strict["findings"] if f["id"] != "excessive_speedup"] == []
    assert strict["correctness"]["mode"] == "strict" and strict["correctness"]["signed_trial"] == "passed"
    assert (
        strict["timing"]["candidate"]["method"] == "strict"
        and strict["timing"]["candidate"]["input_sets"] == 3
    )
    kb = worker.run_request(affine_request(source, tmp_path, mode="kernelbench"))
    assert kb["status"] == "passed" and kb["timing"]["candidate"]["method"] == "kernelbench"
    assert "findings" not in kb and kb["correctness"]["mode"] == "kernelbench"
    bad = worker.run_request(affine_request(source, tmp_path, mode="lenient"))
    assert bad["status"] == "runtime_error" and "unknown mode 'lenient'" in bad["message"]


PATCH_IN_FORWARD = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        torch.cuda.Event.elapsed_time = lambda self, end: 0.001
        return x * self.scale + self.bias
"""

SLOW_PATH_IMPOSSIBLY_FAST = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        return x * self.scale + self.bias
"""


def test_worker_rejects_a_patch_made_inside_forward(in_process: None, tmp_path: Path) -> None:
    original = torch.cuda.Event.elapsed_time
    try:
        response = worker.run_request(affine_request(PATCH_IN_FORWARD, tmp_path, mode="strict"))
    finally:
        torch.cuda.Event.elapsed_time = original
    assert response["status"] == "runtime_error"
    assert "torch.cuda.Event.elapsed_time" in response["message"]
    assert [f["id"] for f in response["findings"]] == ["patches_harness"]


def test_the_worker_reports_its_times_and_the_parent_judges_the_speed_of_light(
    in_process: None, tmp_path: Path
) -> None:
    request = affine_request(SLOW_PATH_IMPOSSIBLY_FAST, tmp_path, mode="strict", sol_ms=1e3)
    response = worker.run_request(request)
    assert response["status"] == "passed"
    assert "impossible_speed" not in {f["id"] for f in response["findings"]}  # the worker only measures
    impossible = speed_of_light_findings(request, response)
    assert [f["id"] for f in impossible] == ["impossible_speed"] and impossible[0]["severity"] == "error"
    assert (
        f"a timed call took {response['timing']['candidate']['min_ms']:.4g} ms" in impossible[0]["evidence"]
    )
    assert "below the speed-of-light floor of 1000 ms" in impossible[0]["evidence"]
    assert speed_of_light_findings(affine_request(SLOW_PATH_IMPOSSIBLY_FAST, tmp_path), response) == []


NOISY_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        return x * self.scale + self.bias + 1e-3 * torch.rand_like(x)


def get_inputs():
    return [torch.rand(32, 64)]


def get_init_inputs():
    return [2.0, 0.5]
"""


def test_a_stochastic_reference_does_not_fail_an_honest_candidate(in_process: None, tmp_path: Path) -> None:
    """Reseeded before every correctness call, both draw the same noise; timed outputs are not compared."""
    twin = NOISY_PROBLEM.split("\n\n\ndef get_inputs")[0].replace("class Model(", "class ModelNew(")
    response = worker.run_request(affine_request(twin, tmp_path, mode="strict", problem_source=NOISY_PROBLEM))
    assert response["status"] == "passed", response["message"]
    assert "timing_output_check_skipped" in {f["id"] for f in response["findings"]}


BACKGROUND_THREAD = """
import threading
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        y = torch.empty_like(x)

        def later():
            time.sleep(0.05)
            torch.add(torch.mul(x, self.scale), self.bias, out=y)

        threading.Thread(target=later, daemon=True).start()
        return y
"""


def test_deferred_work_in_a_thread_fails_in_a_real_worker(tmp_path: Path) -> None:
    response = evaluate(affine_request(BACKGROUND_THREAD, tmp_path, mode="strict"), timeout_s=120)
    assert response["status"] == "wrong_output", response["message"]
    assert "background_thread" in {f["id"] for f in response["findings"]}
