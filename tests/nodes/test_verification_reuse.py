"""What a verification measured serves later steps: the reference's profile split the next
verifications, the candidate's profile summary the profiler node."""

from __future__ import annotations

from typing import Any

from graph.artifacts import Best, BuildResult, Candidate, TestResult
from nodes.support.worker_client import to_test_result
from nodes.verifier import measured_reference_split
from tools.worker.verify import reused_reference_split

SPLIT = {"device_ms": 1.42, "split_ms": {"torch": 1.42}, "torch_ops_ms": {"aten::relu": 1.42}, "streams": 1}


def _response(reference: dict[str, Any] | None) -> dict[str, Any]:
    split = {"candidate": {"device_ms": 1.41, "split_ms": {"own": 1.41}}}
    if reference is not None:
        split["reference"] = reference
    return {"status": "passed", "profile_split": split, "operator_coverage": 1.0}


def test_a_verification_keeps_the_reference_split_and_the_next_request_carries_it() -> None:
    test = to_test_result(_response(SPLIT), "class ModelNew: pass\n")
    assert test.reference_split == SPLIT
    best = Best(
        candidate=Candidate(id=1, source="x = 1\n", mode="write", policy="offline"),
        test=test,
        build=BuildResult(ok=True),
    )
    assert measured_reference_split({"best": best.dump()}) == SPLIT  # type: ignore[typeddict-unknown-key]
    failed = TestResult(status="wrong_output")
    state: Any = {"test": failed.dump()}
    assert measured_reference_split(state) is None  # nothing measured yet: the worker profiles it
    state = {"test": failed.dump(), "best": best.dump()}
    assert measured_reference_split(state) == SPLIT  # a failed last test does not hide the best's


def test_the_worker_reuses_only_a_well_formed_split() -> None:
    assert reused_reference_split({"reference_split": SPLIT}) == SPLIT  # type: ignore[typeddict-item]
    for bad in ({}, {"device_ms": "1"}, {"device_ms": 1.0, "torch_ops_ms": []}, [1, 2], None):
        assert reused_reference_split({"reference_split": bad}) is None  # type: ignore[typeddict-item]
    assert reused_reference_split({}) is None
    assert to_test_result(_response(None), "").reference_split is None


def test_the_profiler_node_reads_the_verifications_profile_instead_of_starting_a_worker() -> None:
    from nodes.profiler import verified_profile
    from nodes.support.worker_client import to_profile

    summary = {
        "source": "torch_profiler",
        "events": "cuda_kernels",
        "device_ms": 1.41,
        "kernel_count": 1,
        "own_kernel_share": 1.0,
        "top": [{"name": "stitch_ew_vec_kernel", "calls": 1, "total_ms": 1.41, "share": 1.0}],
    }
    response = {**_response(SPLIT), "profile": summary, "device": "NVIDIA H100 80GB HBM3"}
    test = to_test_result(response, "class ModelNew: pass\n")
    answer = verified_profile(test)
    assert answer is not None and answer["status"] == "passed" and answer["device"] == test.device
    assert to_profile(answer["profile"]).device_ms == 1.41  # what the node builds its evidence from
    assert verified_profile(to_test_result(_response(SPLIT), "")) is None  # no trace: the worker profiles
    assert verified_profile(test.model_copy(update={"status": "wrong_output"})) is None
