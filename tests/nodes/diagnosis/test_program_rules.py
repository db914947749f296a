"""nodes.diagnosis program-level rules over captured profiles: launch-bound, host syncs and copies,
redundant passes, tensor cores, SOL; and the Diagnosis's report form."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.profiles import (
    H200,
    MATMUL,
    MEASURED,
    RELU,
    bad_kernels,
    host_sync,
    plan,
    records,
    rules,
    system,
)

from graph.artifacts import Profile, TestResult
from nodes import diagnosis


def test_redundant_passes_compares_dram_bytes_with_the_plans_minimum() -> None:
    finding = next(f for f in bad_kernels().findings if f.rule == "redundant-passes")
    assert finding.evidence["minimum_bytes"] == 1_073_741_824
    moved = sum(k.dram_bytes or 0.0 for k in records("bad_kernels_candidate.raw.csv").kernels)
    assert finding.evidence["ratio"] == pytest.approx(moved / 1_073_741_824, abs=0.01) and moved > 1.6e10


def test_program_level_findings_for_syncs_copies_and_idle_gpu() -> None:
    d = host_sync()
    assert d.top is not None and d.top.rule == "host-sync"
    assert d.top.evidence["syncs_per_forward"] == 4.0 and d.top.evidence["dtoh_copies"] == 2.0
    assert {"launch-bound", "host-transfers"} <= set(rules(d))
    launch = next(f for f in d.findings if f.rule == "launch-bound")
    assert launch.evidence["kernels_per_forward"] == 26.0 and "CUDA graph" in launch.advice[0]


def test_a_kernel_at_the_bandwidth_roof_has_little_at_stake() -> None:
    evidence = diagnosis.Evidence(
        system=system("relu_both", "candidate", 5, ("stitch_ew_vec_kernel",)),
        ncu=records("relu_candidate.raw.csv"),
        device="NVIDIA H200",
    )
    d = diagnosis.diagnose(evidence, plan=RELU, ceilings=MEASURED)
    assert d.pct_of_sol == pytest.approx(100 * RELU.total_bytes / H200.copy_bandwidth * 1e3 / d.measured_ms)
    assert 90 < d.pct_of_sol < 100
    assert d.top is not None and d.top.rule == "memory-bound" and d.top.impact < 0.1
    assert not {"launch-bound", "uncoalesced-access", "host-sync", "redundant-passes"} & set(rules(d))
    assert "95% of SOL" in d.summary()


def test_fp32_gemm_off_the_tensor_cores_is_reported_with_the_precision_caveat() -> None:
    evidence = diagnosis.Evidence(ncu=records("matmul_reference.raw.csv"), device="NVIDIA H200")
    fp32 = diagnosis.diagnose(evidence, plan=MATMUL, ceilings=MEASURED, precision="fp32")
    finding = next(f for f in fp32.findings if f.rule == "no-tensor-cores")
    assert "fp32 tolerance" in finding.title and finding.evidence["fma_pipe_pct"] == pytest.approx(79.33)
    tf32 = diagnosis.diagnose(evidence, plan=MATMUL, ceilings=MEASURED, precision="tf32")
    allowed = next(f for f in tf32.findings if f.rule == "no-tensor-cores")
    assert "tf32 allows them" in allowed.title and allowed.impact > finding.impact


def test_no_tensor_core_finding_needs_a_gemm_heavy_compute_bound_problem() -> None:
    evidence = diagnosis.Evidence(ncu=records("matmul_reference.raw.csv"), device="NVIDIA H200")
    memory_bound = plan("matmul", 1_000, 10**9)
    assert "no-tensor-cores" not in rules(diagnosis.diagnose(evidence, plan=memory_bound, ceilings=MEASURED))


def test_launch_bound_from_the_worker_profile_and_the_timing_alone() -> None:
    profile = Profile(source="torch_profiler", device_ms=0.3, kernel_count=20, own_kernel_share=1.0)
    test = TestResult(status="passed", candidate_ms=1.0)
    d = diagnosis.diagnose(diagnosis.Evidence(profile=profile, device="NVIDIA H200"), test=test)
    assert d.top is not None and d.top.rule == "launch-bound"
    assert d.top.impact == pytest.approx(0.9 * 0.7)
    one_long_kernel = Profile(source="torch_profiler", device_ms=0.9, kernel_count=1, own_kernel_share=1.0)
    quiet = diagnosis.diagnose(diagnosis.Evidence(profile=one_long_kernel, device="NVIDIA H200"), test=test)
    assert "launch-bound" not in rules(quiet)


def test_host_bound_from_the_timed_calls_host_time_beside_eagers() -> None:
    """A conv+BN program of four long kernels (not launch-bound) whose call spends 442 us on the host
    against eager's 133 (the H100 probe's level2/4 numbers): host-bound, answered by the CUDA graph."""
    from codegen.advice import CUDA_GRAPH_ADVICE, advice_for, choose_optimisation
    from codegen.emit.assemble import Options

    profile = Profile(source="torch_profiler", device_ms=0.95, kernel_count=4, own_kernel_share=1.0)
    evidence = diagnosis.Evidence(profile=profile, device="NVIDIA H100")
    slow = TestResult(status="passed", candidate_ms=1.068, candidate_issue_ms=0.4417, eager_issue_ms=0.1328)
    d = diagnosis.diagnose(evidence, test=slow)
    assert "launch-bound" not in rules(d)  # four kernels of ~240 us: nothing the launch rule sees
    host = next(f for f in d.findings if f.rule == "host-bound")
    assert host.evidence["candidate_issue_us"] == pytest.approx(441.7)
    assert host.impact == pytest.approx(0.9 * (441.7 - 132.8) / 1068.0, rel=1e-3)
    assert "442 us" in host.title and "CUDA graph" in host.advice[0]
    feedback = advice_for(d.findings)
    assert CUDA_GRAPH_ADVICE in feedback.suggestions
    chosen = choose_optimisation(feedback, Options(), traced=True, launches=3, has_elementwise=True)
    assert chosen is not None and chosen.name == "cuda_graph"
    # ... unless the graph's input copies cost more than it saves (codegen.schedule.plan.graph_pays)
    costly = choose_optimisation(
        feedback, Options(), traced=True, launches=3, has_elementwise=True, graph_pays=False
    )
    assert costly is None or costly.name != "cuda_graph"
    # Eager's own host time is the floor: a 1.5 ms streaming kernel issued in 47 us against eager's 18 us
    # is 3% of the forward; and a call no slower to issue than eager's is never host-bound.
    streaming = TestResult(status="passed", candidate_ms=1.46, candidate_issue_ms=0.047, eager_issue_ms=0.018)
    equal = TestResult(status="passed", candidate_ms=0.3, candidate_issue_ms=0.1, eager_issue_ms=0.09)
    for test in (streaming, equal, TestResult(status="passed", candidate_ms=1.0)):
        assert "host-bound" not in rules(diagnosis.diagnose(evidence, test=test))


def test_a_cpu_run_says_there_is_no_gpu_evidence() -> None:
    profile = Profile(source="torch_profiler", device_ms=3.0, kernel_count=3, own_kernel_share=0.5)
    d = diagnosis.diagnose(diagnosis.Evidence(profile=profile, device="cpu"), plan=RELU, ceilings=H200)
    assert rules(d) == ["no-gpu-profile"]
    assert any("ceilings assumed" in note for note in d.notes)


def test_diagnosis_serialises_for_reports(tmp_path: Path) -> None:
    import json

    data = bad_kernels().to_dict()
    text = json.dumps(data)
    assert data["findings"][0]["rule"] == "redundant-passes"
    assert data["speed_of_light"]["bound"] == "memory" and data["speed_of_light"]["pct_of_sol"] is not None
    assert data["kernels"][0]["class"] == "memory-bound" and "transpose_naive" in text
