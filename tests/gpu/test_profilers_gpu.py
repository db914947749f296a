"""The profilers for real on a GPU: ncu records, nsys and PyTorch-profiler timelines, ceilings, diagnosis.

Imports only tools at module level (the GPU machine has no pydantic); the diagnosis test skips there.

Target: docs/examples/relu_solution.py (kernels relu_f4, relu_tail) against the ReLU problem the
worker tests use. One build serves the module (the cache directory is shared). Each tool's test
skips, with the tool's own reason, where the tool is missing or refuses (no counters, no importer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tools import roofline
from tools.profilers import ncu, nsys
from tools.profilers.system_profile import torch_profile

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

REPO = Path(__file__).resolve().parents[2]
PROBLEM = (REPO / "tests" / "candidates" / "worker" / "relu_problem.py").read_text()
SOLUTION = (REPO / "docs" / "examples" / "relu_solution.py").read_text()
ELEMENTS = 4096 * 16384


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("profilers-build-cache")


@pytest.fixture(scope="module")
def ncu_candidate(cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> ncu.NcuResult:
    result = ncu.profile_kernels(
        PROBLEM, SOLUTION, cache_dir=cache_dir, timeout_s=600, keep_dir=tmp_path_factory.mktemp("ncu-cand")
    )
    if result.status in ("unavailable", "no_permission"):
        pytest.skip(f"ncu: {result.status}: {result.reason}")
    return result


@pytest.fixture(scope="module")
def nsys_both(cache_dir: Path) -> dict[str, dict[str, Any]]:
    tool = nsys.find_nsys()
    if tool is None:
        pytest.skip("nsys not found")
    summaries = {
        t: nsys.profile_system(PROBLEM, SOLUTION if t == "candidate" else None, cache_dir=cache_dir)
        for t in ("reference", "candidate")
    }
    if summaries["candidate"]["status"] != "ok":
        pytest.skip(f"nsys could not report here: {summaries['candidate']['reason']}")
    return summaries


def test_ncu_records_the_candidates_kernel_with_the_core_metrics(ncu_candidate: ncu.NcuResult) -> None:
    assert ncu_candidate.status == "ok", ncu_candidate.reason
    relu = next(k for k in ncu_candidate.kernels if k.base_name == "relu_f4")
    assert relu.duration_ns and relu.duration_ns > 10_000
    assert relu.dram_throughput_pct is not None and relu.dram_throughput_pct > 30.0
    assert relu.registers_per_thread and relu.block_size == 256
    assert relu.achieved_occupancy_pct is not None and relu.theoretical_occupancy_pct is not None
    assert relu.global_load_sectors_per_request == pytest.approx(16.0, rel=0.05)  # float4 loads, coalesced
    core = {
        "duration_ns",
        "sm_throughput_pct",
        "dram_throughput_pct",
        "registers_per_thread",
        "achieved_occupancy_pct",
    }
    assert not core & set(ncu_candidate.metrics_missing)
    assert roofline.classify_kernel(relu)[0] == "memory-bound"


def test_ncu_reports_the_flop_counts_of_the_kernel_roofline(ncu_candidate: ncu.NcuResult) -> None:
    # The chip's metric list accepts the FP32 instruction counts (docs/reports.md: kernel roofline)
    flop_fields = {"fadd_thread_inst", "fmul_thread_inst", "ffma_thread_inst"}
    names = {ncu.FIELD_METRICS[f][0] for f in flop_fields}
    assert ncu_candidate.status == "ok", ncu_candidate.reason
    assert not names & set(ncu_candidate.metrics_dropped), ncu_candidate.metrics_dropped
    assert not flop_fields & set(ncu_candidate.metrics_missing)
    relu = next(k for k in ncu_candidate.kernels if k.base_name == "relu_f4")
    assert relu.fp32_flops is not None and relu.fp32_flops >= 0.0  # reported (a max is no FLOP)


def test_ncu_profiles_the_reference_kernels_too(cache_dir: Path, ncu_candidate: ncu.NcuResult) -> None:
    result = ncu.profile_kernels(PROBLEM, None, cache_dir=cache_dir, timeout_s=300)
    assert result.status == "ok" and result.target == "reference"
    assert all("relu_f4" not in k.name for k in result.kernels) and result.kernels[0].duration_ns


def test_nsys_summarises_each_target_per_forward(nsys_both: dict[str, dict[str, Any]]) -> None:
    ref, cand = nsys_both["reference"], nsys_both["candidate"]
    assert cand["source"] == "nsys" and cand["kernel_count"] >= 1.0
    assert cand["own_kernel_share"] > 0.9 and ref["own_kernel_share"] == 0.0
    assert cand["host_syncs"]["count"] == 0.0  # the driver's synchronize is outside the range
    assert 0.0 < cand["gpu_busy_pct"] <= 100.0 and cand["wall_ms"] > 0.0


def test_the_pytorch_profiler_fallback_gives_the_same_kind_of_summary(cache_dir: Path) -> None:
    summary = torch_profile(PROBLEM, SOLUTION, cache_dir=cache_dir, timeout_s=300)
    assert summary["status"] == "ok" and summary["source"] == "torch_profiler"
    assert summary["kernel_count"] >= 1.0 and summary["own_kernel_share"] > 0.9
    assert summary["top_kernels"][0]["name"].startswith("relu_f4")


def test_ceilings_measured_here_are_plausible_and_leave_tf32_as_it_was() -> None:
    before = torch.backends.cuda.matmul.allow_tf32
    ceilings = roofline.measure_ceilings(size=4096, copy_bytes=1 << 28, reps=5)
    assert torch.backends.cuda.matmul.allow_tf32 is before
    assert 0.5e12 < ceilings.copy_bandwidth < 2e13
    assert ceilings.fp32_flops < ceilings.tf32_flops < ceilings.bf16_flops
    assert ceilings.gpu == torch.cuda.get_device_name() and ceilings.source == "measured"


def test_diagnosis_of_real_records_reports_sol_and_cites_notes(ncu_candidate: ncu.NcuResult) -> None:
    pytest.importorskip("pydantic", reason="the graph side (pydantic, chromadb) is not installed here")
    pytest.importorskip("chromadb", reason="the graph side (pydantic, chromadb) is not installed here")
    from graph.artifacts import OpInfo, Plan
    from nodes import diagnosis

    plan = Plan(
        task="relu",
        ops=[OpInfo(node="relu", op="relu", target="torch.relu", flops=ELEMENTS, bytes=8 * ELEMENTS)],
        total_flops=ELEMENTS,
        total_bytes=8 * ELEMENTS,
    )
    gpu = torch.cuda.get_device_name()
    evidence = diagnosis.Evidence(ncu=ncu_candidate, device=gpu)
    diagnosed = diagnosis.diagnose(evidence, plan=plan, ceilings=roofline.device_ceilings(gpu))
    assert diagnosed.pct_of_sol is not None and diagnosed.top is not None
    feedback = diagnosis.feedback_from(diagnosed, diagnosis.retrieve_guidance(diagnosed))
    assert feedback.kind == "optimize" and feedback.sources
