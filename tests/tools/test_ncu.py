"""tools.profilers.ncu on the CPU: raw-page parsing into typed records, metric selection, refusal detection.

The inputs are the fixtures in tests/fixtures/profiles/ncu: real ncu 2025.3.1 exports captured on an
H200, plus a few hand-made ones (see the README there). No ncu runs here: the GPU test runs it for real.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from conftest import FIXTURES

from tools.profilers import ncu

NCU = FIXTURES / "profiles" / "ncu"


def records(name: str) -> list[ncu.KernelMetrics]:
    return ncu.parse_records((NCU / name).read_text())


def test_raw_page_rows_carry_units_and_values_as_printed() -> None:
    rows = ncu.parse_raw_csv((NCU / "relu_candidate.raw.csv").read_text())
    assert len(rows) == 1
    unit, value = rows[0]["gpu__time_duration.sum"]
    assert unit == "ns" and value == "995,648"  # ncu 2025.3 prints "ns", not "nsecond"
    assert rows[0]["Block Size"][1] == "(256, 1, 1)"
    assert rows[0]["launch__grid_size"] == ("", "524,288")


def test_relu_record_is_typed_with_thousands_separators_removed() -> None:
    (relu,) = records("relu_candidate.raw.csv")
    assert relu.base_name == "stitch_ew_vec_kernel"
    assert relu.duration_ns == 995_648.0
    assert relu.grid_size == 524_288.0
    assert relu.dram_throughput_pct == pytest.approx(89.16)
    assert relu.registers_per_thread == 16
    assert relu.global_load_sectors_per_request == 16.0  # float4: 512 B per warp request
    assert relu.dram_bytes == 2_147_497_984 + 2_124_008_448
    assert relu.tensor_pipe_pct == 0.0
    reason, per_issue, share = relu.top_stalls(1)[0]
    assert reason == "long_scoreboard" and per_issue == pytest.approx(57.41) and 0.9 < share < 0.95
    # a bounds check compiled to a branch, taken the same way by the whole warp; no lane idles
    assert relu.branch_instructions == 4_194_304 and relu.simt_efficiency == 1.0


def test_prof_lines_around_the_table_are_skipped_and_every_launch_kept() -> None:
    # ncu prints its ==PROF== lines on the same stream when it writes the page itself (no --import).
    text = (NCU / "bad_kernels_candidate.raw.csv").read_text()
    kernels = ncu.parse_records(
        "==PROF== Connected to process 2417 (/usr/bin/python3.12)\n"
        + text
        + "==PROF== Disconnected from process 2417\n"
    )
    assert [k.base_name for k in kernels] == [
        "transpose_smem_conflicts",
        "divergent_scale",
        "smem_hog",
        "spill_scratch",
        "transpose_naive",
    ]
    assert [k.id for k in kernels] == [0, 1, 2, 3, 4]


def test_derived_metrics_show_each_planted_bottleneck() -> None:
    by_name = {k.base_name: k for k in records("bad_kernels_candidate.raw.csv")}
    assert by_name["transpose_naive"].global_store_sectors_per_request == pytest.approx(32.0, abs=0.01)
    assert by_name["transpose_naive"].global_store_bytes_per_sector_pct == 12.5
    assert by_name["transpose_smem_conflicts"].bank_conflict_ratio == pytest.approx(
        (65_707_579 + 132_150) / (67_804_731 + 2_229_302)
    )
    assert by_name["smem_hog"].occupancy_limiter == "shared_mem"
    assert by_name["smem_hog"].shared_mem_per_block == 204_800
    assert by_name["spill_scratch"].local_sectors == 127_108_420 + 536_989_336
    assert by_name["transpose_naive"].occupancy_limiter == "warps"
    # Divergence: half the lanes idle, yet 99% of branch executions are uniform (the split happens
    # once, the loop back-edges after it are uniform); active threads per instruction shows it.
    divergent = by_name["divergent_scale"]
    assert divergent.branch_uniformity_pct == pytest.approx(99.23)
    assert divergent.threads_per_instruction == pytest.approx(16.2) and divergent.simt_efficiency < 0.55
    # Branch-free kernels (bounds checks compiled to predicates) read 0% uniform: no evidence.
    assert by_name["smem_hog"].branch_uniformity_pct == 0.0 and by_name["smem_hog"].branch_instructions == 0
    assert by_name["smem_hog"].branch_uniformity_evidence is None
    assert by_name["smem_hog"].simt_efficiency == 1.0


def _without_columns(text: str, prefixes: tuple[str, ...]) -> str:
    """The raw page with every column whose name starts with one of `prefixes` cut out."""
    rows = list(csv.reader(io.StringIO(text)))
    keep = [i for i, name in enumerate(rows[0]) if not name.startswith(prefixes)]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(
        [[r[i] for i in keep] for r in rows]
    )
    return out.getvalue()


FLOP_FIELDS = ["fadd_thread_inst", "fmul_thread_inst", "ffma_thread_inst"]


def test_a_full_real_export_misses_no_field_but_the_flop_counts() -> None:
    # The captures predate the FLOP-count metrics (asked for since the kernel roofline): only those miss.
    for name in ("relu_candidate.raw.csv", "matmul_reference.raw.csv", "softmax_candidate.raw.csv"):
        assert ncu.missing_fields(records(name)) == FLOP_FIELDS, name


def _with_flop_columns(text: str, fadd: str, fmul: str, ffma: str) -> str:
    """The raw page with the three FLOP-count columns appended (as the current metric set exports them)."""
    rows = list(csv.reader(io.StringIO(text)))
    names = [ncu.FIELD_METRICS[f][0] for f in FLOP_FIELDS]
    rows[0] += names
    rows[1] += ["inst", "inst", "inst"]
    for row in rows[2:]:
        row += [fadd, fmul, ffma]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue()


def test_flop_counts_give_fp32_flops_with_ffma_counted_twice() -> None:
    text = _with_flop_columns((NCU / "softmax_candidate.raw.csv").read_text(), "1,000", "500", "2,000")
    (kernel,) = ncu.parse_records(text)
    assert kernel.fp32_flops == 1000 + 500 + 2 * 2000
    assert kernel.to_dict()["derived"]["fp32_flops"] == 5500
    assert ncu.missing_fields([kernel]) == []
    assert records("softmax_candidate.raw.csv")[0].fp32_flops is None  # not reported is not zero


def test_missing_columns_stay_none_and_are_listed() -> None:
    # The real cuBLAS SGEMM export without the SASS-patching and tensor-pipe columns, as an older ncu
    # or a narrower metric set gives it.
    text = _without_columns(
        (NCU / "matmul_reference.raw.csv").read_text(),
        ("smsp__sass_average_", "sm__pipe_tensor_"),
    )
    (gemm,) = ncu.parse_records(text)
    assert gemm.branch_uniformity_pct is None
    assert gemm.global_load_bytes_per_sector_pct is None
    assert gemm.tensor_pipe_pct is None
    assert gemm.sm_throughput_pct == pytest.approx(86.78)
    assert gemm.registers_per_thread == 254 and gemm.occupancy_limiter == "registers"
    assert set(ncu.missing_fields([gemm])) == {
        "global_load_bytes_per_sector_pct",
        "global_store_bytes_per_sector_pct",
        "branch_uniformity_pct",
        "tensor_pipe_pct",
        *FLOP_FIELDS,  # the capture predates them
    }


def test_not_available_values_and_garbage_parse_to_nothing() -> None:
    text = (
        '"ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed"\n'
        '"","","nsecond","%"\n'
        '"0","k","n/a","12.5"\n'
    )
    (record,) = ncu.parse_records(text)
    assert record.duration_ns is None and record.sm_throughput_pct == 12.5
    assert ncu.parse_records("==PROF== nothing was profiled\n") == []


def test_time_and_bytes_in_other_units_are_scaled_to_base_units() -> None:
    text = (
        '"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum"\n'
        '"","","usecond","Mbyte"\n'
        '"0","k","1.5","2"\n'
    )
    (record,) = ncu.parse_records(text)
    assert record.duration_ns == 1500.0 and record.dram_bytes_read == 2e6


def test_records_survive_a_round_trip_through_json_data() -> None:
    result = ncu.NcuResult("ok", target="candidate", kernels=records("bad_kernels_candidate.raw.csv"))
    data = result.to_dict()
    assert data["kernels"][4]["derived"]["global_store_sectors_per_request"] == pytest.approx(32.0, abs=0.01)
    back = ncu.NcuResult.from_dict(data)
    assert back.kernels[2].occupancy_limiter == "shared_mem"
    assert back.kernels[0].stalls == result.kernels[0].stalls


def test_kernel_groups_sum_launches_by_name_and_rank_by_time() -> None:
    # Two steps of the recurrent loop: cuBLAS split-K SGEMM (Kernel2 + splitKreduce), a small xmma
    # GEMM, then torch's add and tanh (same base name, different template: two groups).
    groups = ncu.kernel_groups(records("recurrent_reference.raw.csv"))
    assert [g["base_name"] for g in groups] == [
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1"
        "_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
        "Kernel2",
        "splitKreduce_kernel",
        "vectorized_elementwise_kernel",
        "vectorized_elementwise_kernel",
    ]
    assert [g["calls"] for g in groups] == [2] * 5
    assert groups[0]["total_ns"] == 16_928 + 16_896 and groups[0]["exemplar"].duration_ns == 16_928
    assert sum(g["share"] for g in groups) == pytest.approx(1.0)
    assert "CUDAFunctor_add" in groups[3]["exemplar"].name and "tanh" in groups[4]["exemplar"].name


def test_query_metrics_listing_drops_names_the_chip_lacks() -> None:
    available = ncu.parse_query_metrics((NCU / "query_metrics.txt").read_text())
    # A trimmed excerpt of the real H200 listing (ncu 2025.3.1): wrapped description lines and the
    # "FBSP.TriageCompute." configuration rows are not base names.
    assert "dram__bytes_read" in available and "Metric" not in available
    assert "dramc__cycles_elapsed" not in available and "activity" not in available
    assert "sm__pipe_tensor_cycles_active" in available  # listed on Hopper; only gmma is not
    kept, dropped = ncu.select_metrics(ncu.EXTRA_METRICS, available)
    # The excerpt was trimmed before the FLOP-count metrics were asked for, so it lacks their rows too
    # (Nsight Compute's own roofline section reads them on Hopper; a chip that lacks them drops them here).
    flop_metrics = [ncu.FIELD_METRICS[f][0] for f in FLOP_FIELDS]
    assert dropped == [
        *flop_metrics,
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    ]
    assert ncu.stall_metric("long_scoreboard") in kept
    assert ncu.select_metrics(("a__b.sum",), set()) == (["a__b.sum"], [])  # no list: ask for everything
    assert ncu.select_metrics(("a__b.sum",), {"c__d"}) == (["a__b.sum"], [])  # not a chip's list either
    # A long listing that knows few of our names (seen on an H200) is distrusted too.
    partial = {f"unrelated__metric_{i}" for i in range(80)} | {"dram__bytes_read"}
    assert ncu.select_metrics(ncu.EXTRA_METRICS, partial) == (list(ncu.EXTRA_METRICS), [])


@pytest.mark.parametrize(
    ("log", "status"),
    [
        ("permission_denied.log", "no_permission"),
        ("sandboxed.log", "unavailable"),
        ("bad_metric.log", "failed"),
    ],
)
def test_refusals_are_recognised(log: str, status: str) -> None:
    found = ncu.classify_failure((NCU / log).read_text())
    assert found is not None and found[0] == status and found[1]
    assert ncu.classify_failure("==PROF== Disconnected from process 1\n") is None


def test_a_rejected_metric_name_is_extracted_for_the_retry() -> None:
    assert ncu._BAD_METRIC.findall((NCU / "bad_metric.log").read_text()) == [
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
    ]


def test_command_profiles_only_the_range_with_clocks_untouched(tmp_path: Path) -> None:
    command = ncu.profile_command("ncu", tmp_path / "r.ncu-rep", ["a__b.sum"], 40, ["python", "-m", "x"])
    joined = " ".join(command)
    assert "--clock-control none" in joined and "--profile-from-start off" in joined
    assert "--launch-count 40" in joined and "--metrics a__b.sum" in joined
    assert [command[i + 1] for i, c in enumerate(command) if c == "--section"] == list(ncu.SECTIONS)
    assert command[-3:] == ["python", "-m", "x"]
    export = ncu.export_command("ncu", tmp_path / "r.ncu-rep")
    assert export[1:3] == ["--import", str(tmp_path / "r.ncu-rep")]
    assert export[3:] == ["--csv", "--page", "raw", "--print-units", "base"]


def test_missing_ncu_is_a_clear_result_not_an_exception(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ncu.NCU_ENV, str(tmp_path / "no-such-ncu"))
    assert ncu.find_ncu() is None
    result = ncu.profile_kernels("print('problem')", None)
    assert result.status == "unavailable" and "ncu not found" in result.reason
    assert result.target == "reference" and not result.ok
