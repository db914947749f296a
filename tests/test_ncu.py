"""tools.ncu on the CPU: raw-page parsing into typed records, metric selection, refusal detection.

The inputs are the fixtures in tests/fixtures/profiles/ncu (hand-made until the H200 capture replaces
them; see the README there). No ncu runs here: the GPU test runs it for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES

from tools import ncu

NCU = FIXTURES / "profiles" / "ncu"


def records(name: str) -> list[ncu.KernelMetrics]:
    return ncu.parse_records((NCU / name).read_text())


def test_raw_page_rows_carry_units_and_values_as_printed() -> None:
    rows = ncu.parse_raw_csv((NCU / "relu_candidate.raw.csv").read_text())
    assert len(rows) == 1
    unit, value = rows[0]["gpu__time_duration.sum"]
    assert unit == "nsecond" and value == "1,071,584"
    assert rows[0]["Block Size"][1] == "(256, 1, 1)"


def test_relu_record_is_typed_with_thousands_separators_removed() -> None:
    (relu,) = records("relu_candidate.raw.csv")
    assert relu.base_name == "stitch_relu_ew_vec4"
    assert relu.duration_ns == 1_071_584.0
    assert relu.dram_throughput_pct == pytest.approx(91.4)
    assert relu.registers_per_thread == 16
    assert relu.global_load_sectors_per_request == 16.0  # float4: 512 B per warp request
    assert relu.dram_bytes == 2_147_617_024 + 2_147_502_080
    assert relu.tensor_pipe_pct == 0.0
    reason, per_issue, share = relu.top_stalls(1)[0]
    assert reason == "long_scoreboard" and per_issue == pytest.approx(24.61) and 0.8 < share < 0.85


def test_prof_lines_around_the_table_are_skipped_and_every_launch_kept() -> None:
    kernels = records("bad_kernels_candidate.raw.csv")
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
    assert by_name["transpose_naive"].global_store_sectors_per_request == 32.0
    assert by_name["transpose_naive"].global_store_bytes_per_sector_pct == 12.5
    assert by_name["transpose_smem_conflicts"].bank_conflict_ratio == pytest.approx(65_011_712 / 69_206_016)
    assert by_name["smem_hog"].occupancy_limiter == "shared_mem"
    assert by_name["smem_hog"].shared_mem_per_block == 204_800
    assert by_name["spill_scratch"].local_sectors == 2_097_152 + 16_777_216
    assert by_name["divergent_scale"].branch_uniformity_pct == pytest.approx(51.3)
    assert by_name["transpose_naive"].occupancy_limiter == "warps"


def test_missing_columns_stay_none_and_are_listed() -> None:
    (gemm,) = records("matmul_reference.raw.csv")
    assert gemm.branch_uniformity_pct is None
    assert gemm.global_load_bytes_per_sector_pct is None
    assert gemm.tensor_pipe_pct is None
    assert gemm.sm_throughput_pct == pytest.approx(83.6)
    assert gemm.occupancy_limiter == "registers"
    assert set(ncu.missing_fields([gemm])) == {
        "global_load_bytes_per_sector_pct",
        "global_store_bytes_per_sector_pct",
        "branch_uniformity_pct",
        "tensor_pipe_pct",
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
    assert data["kernels"][4]["derived"]["global_store_sectors_per_request"] == 32.0
    back = ncu.NcuResult.from_dict(data)
    assert back.kernels[2].occupancy_limiter == "shared_mem"
    assert back.kernels[0].stalls == result.kernels[0].stalls


def test_kernel_groups_sum_launches_by_name_and_rank_by_time() -> None:
    groups = ncu.kernel_groups(records("recurrent_reference.raw.csv"))
    assert [g["base_name"] for g in groups] == ["gemv2T_kernel_val", "vectorized_elementwise_kernel"]
    assert groups[0]["calls"] == 4 and groups[0]["total_ns"] == 6112 + 6113 + 6114 + 6115
    assert sum(g["share"] for g in groups) == pytest.approx(1.0)
    assert groups[0]["exemplar"].duration_ns == 6115


def test_query_metrics_listing_drops_names_the_chip_lacks() -> None:
    available = ncu.parse_query_metrics((NCU / "query_metrics.txt").read_text())
    assert "dram__bytes_read" in available and "Metric" not in available
    kept, dropped = ncu.select_metrics(ncu.EXTRA_METRICS, available)
    assert set(dropped) == {
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    }
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
