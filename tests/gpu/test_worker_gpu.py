"""The worker on a real GPU: docs/examples/relu_solution.py against a ReLU problem (skips without CUDA).

One nvcc build serves the module: the other candidates change only the Python `forward`, so their
extension is a cache hit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

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
CALL = "_ext.relu(x.data_ptr(), y.data_ptr(), x.numel(), torch.cuda.current_stream(x.device).cuda_stream)"


def relu_request(cache_dir: Path, candidate: str = SOLUTION, **overrides: Any) -> EvalRequest:
    request = EvalRequest(
        action="verify",
        problem_name="19_ReLU",
        problem_source=PROBLEM,
        candidate_source=candidate,
        device="cuda",
        perf_trials=30,
        cache_dir=str(cache_dir),
    )
    request.update(overrides)  # type: ignore[typeddict-item]
    return request


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpu-build-cache")


@pytest.fixture(scope="module")
def verified(cache_dir: Path) -> dict[str, Any]:
    return dict(evaluate(relu_request(cache_dir), timeout_s=600))


def test_relu_solution_passes_and_is_timed_against_eager(verified: dict[str, Any]) -> None:
    assert verified["status"] == "passed", verified["message"]
    assert verified["device"] == torch.cuda.get_device_name(0)
    assert verified["correctness"]["passed"] == verified["correctness"]["trials"] == 5
    assert verified["correctness"]["max_abs_err"] == 0.0  # ReLU is exact
    timing_info = verified["timing"]
    assert timing_info["candidate"]["trials"] == timing_info["eager"]["trials"] == 30
    assert timing_info["candidate_ms"] > 0 and timing_info["eager_ms"] > 0
    assert 0.2 < timing_info["eager_ms"] / timing_info["candidate_ms"] < 10  # same memory-bound work
    assert verified["build"]["kernels"] == ["relu_f4", "relu_tail"]


def test_profile_attributes_device_time_to_the_program_kernels(
    verified: dict[str, Any], cache_dir: Path
) -> None:
    response = evaluate(relu_request(cache_dir, action="profile", profile_reference=True), timeout_s=300)
    assert response["status"] == "passed", response["message"]
    assert response["build"]["cached"] is True
    info = response["profile"]
    assert info["events"] == "cuda_kernels"
    assert info["kernel_count"] >= 1 and info["device_ms"] > 0
    assert info["own_kernel_share"] > 0.9
    assert info["top"][0]["name"].startswith("relu_f4")
    assert info["reference"]["own_kernel_share"] == 0 and info["reference"]["kernel_count"] >= 1


def test_a_forward_that_skips_elements_is_wrong_output(verified: dict[str, Any], cache_dir: Path) -> None:
    partial = SOLUTION.replace(CALL, CALL.replace("x.numel()", "x.numel() - 4096"))
    assert partial != SOLUTION
    response = evaluate(relu_request(cache_dir, partial), timeout_s=300)
    assert response["status"] == "wrong_output", response["message"]
    assert response["build"]["cached"] is True
    assert response["correctness"]["where"].startswith("[4095, ")  # the last row was never written


def test_an_illegal_address_is_runtime_error(verified: dict[str, Any], cache_dir: Path) -> None:
    broken = SOLUTION.replace(CALL, CALL.replace("y.data_ptr()", "16"))
    response = evaluate(relu_request(cache_dir, broken), timeout_s=300)
    assert response["status"] == "runtime_error", response["message"]
    assert "ModelNew.forward raised on correctness trial 1" in response["message"]
    assert "illegal" in response["message"].lower() or "misaligned" in response["message"].lower()
