"""nodes.diagnosis kernel-level rules over real ncu records and synthetic ones: the planted bottlenecks,
coalescing, occupancy, small grids, and library kernels (call-level advice only)."""

from __future__ import annotations

from support.profiles import (
    MATMUL,
    MEASURED,
    bad_kernels,
    kernel,
    plan,
    records,
    rules,
)

from nodes import diagnosis


def test_every_planted_kernel_bottleneck_is_found_and_the_worst_ranks_first() -> None:
    d = bad_kernels()
    # Five kernels each make a full pass over the matrix (and one spills): 16x the minimum traffic.
    assert d.top is not None and d.top.rule == "redundant-passes"
    found = {(f.rule, f.kernel) for f in d.findings}
    assert {
        ("uncoalesced-access", "transpose_naive"),
        ("bank-conflicts", "transpose_smem_conflicts"),
        ("warp-divergence", "divergent_scale"),
        ("low-occupancy-shared-memory", "smem_hog"),
        ("register-spills", "spill_scratch"),
    } <= found
    # The branch-free kernels read 0% branch uniformity; that is no divergence evidence.
    assert {k for r, k in found if r == "warp-divergence"} == {"divergent_scale"}
    uncoalesced = next(f for f in d.findings if f.rule == "uncoalesced-access")
    assert uncoalesced.evidence["global_store_bytes_used_per_sector_pct"] == 12.5
    impacts = [f.impact for f in d.findings]
    assert impacts == sorted(impacts, reverse=True) and all(0.0 <= i <= 1.0 for i in impacts)


def test_cublas_cp_async_loads_reading_zero_bytes_per_sector_are_not_uncoalesced() -> None:
    # Real H200 record: cuBLAS SGEMM loads through cp.async; ncu's SASS byte count reads 0% there,
    # at 4 sectors per request (a perfectly coalesced fp32 warp access). 0% is no evidence.
    gemm = records("matmul_reference.raw.csv").kernels[0]
    assert gemm.global_load_bytes_per_sector_pct == 0 and gemm.global_load_sectors_per_request == 4
    evidence = diagnosis.Evidence(ncu=records("matmul_reference.raw.csv"), device="NVIDIA H200")
    found = diagnosis.diagnose(evidence, plan=MATMUL, ceilings=MEASURED, precision="fp32")
    assert "uncoalesced-access" not in rules(found) and found.top.rule == "no-tensor-cores"
    strided = diagnosis.diagnose(
        diagnosis.Evidence(
            ncu=kernel(
                global_load_bytes_per_sector_pct=0.0, global_load_sectors=3.2e7, global_load_requests=1e6
            )
        )
    )
    assert "uncoalesced-access" in rules(strided)  # many sectors per request still count


def test_low_occupancy_from_registers_unless_the_kernel_is_compute_bound() -> None:
    d = diagnosis.diagnose(diagnosis.Evidence(ncu=kernel(), device="GPU"))
    finding = next(f for f in d.findings if f.rule == "low-occupancy-registers")
    assert (
        finding.evidence["registers_per_thread"] == 128.0
        and "launch__registers_per_thread" in finding.metrics
    )
    busy = diagnosis.diagnose(diagnosis.Evidence(ncu=kernel(sm_throughput_pct=85.0), device="GPU"))
    assert "low-occupancy-registers" not in rules(busy)


def test_small_grid_shows_in_the_latency_bound_finding() -> None:
    d = diagnosis.diagnose(
        diagnosis.Evidence(ncu=kernel(waves_per_sm=0.25, theoretical_occupancy_pct=100.0), device="GPU")
    )
    finding = next(f for f in d.findings if f.rule == "latency-bound")
    assert finding.evidence["waves_per_sm"] == 0.25 and "fewer blocks than SMs" in finding.symptoms
    assert "0.25 waves" in finding.advice[0]


def test_library_kernels_get_call_level_advice_and_no_advice_to_edit_their_code() -> None:
    # The real RecurrentLoop reference: small per-step cuBLAS GEMMs and torch's elementwise kernels.
    evidence = diagnosis.Evidence(ncu=records("recurrent_reference.raw.csv"), device="NVIDIA H200")
    d = diagnosis.diagnose(evidence, plan=plan("matmul", 12_900_000_000, 915_000_000), ceilings=MEASURED)
    code_level = {
        "low-occupancy-registers",
        "low-occupancy-shared-memory",
        "register-spills",
        "warp-divergence",
    }
    assert not code_level & set(rules(d))  # cuBLAS's register count is not ours to change
    latency = {f.kernel: f.advice[0] for f in d.findings if f.rule == "latency-bound"}
    assert "Kernel2" in latency and "strided-batched GEMM" in latency["Kernel2"]
    assert "fuse it with its neighbours" in latency["vectorized_elementwise_kernel"]
    assert not any("smaller blocks" in advice for advice in latency.values())


def test_library_kernel_names_are_told_from_ours() -> None:
    library = [
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(T1::Params)",
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
        "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>(int, T2, T3)",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>()",
        "ampere_sgemm_128x64_nn",
    ]
    ours = ["void stitch_ew_vec_kernel<StitchEw_74deecb5df>(T1, long)", "transpose_naive", "my_gemv_kernel"]
    assert all(diagnosis.is_library_kernel(name) for name in library)
    assert not any(diagnosis.is_library_kernel(name) for name in ours)
