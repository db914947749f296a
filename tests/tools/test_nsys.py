"""tools.profilers.nsys, timeline and system_profile on the CPU: CSV reports -> per-forward system summary.

Fixtures: tests/fixtures/profiles/nsys (nsys stats CSVs of the relu_both and host_sync recordings, real
from an H200 with nsys 2025.3.1) and .../torch (a real PyTorch-profiler Chrome trace of the host_sync
program). The last tests run the real driver (tools.profilers.target) in a subprocess on this GPU-less machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES

from tools.profilers import nsys, system_profile, tool_run
from tools.profilers.timeline import (
    ApiCall,
    GpuActivity,
    Span,
    Timeline,
    copy_kind,
    format_summary,
    summarize,
    timeline_from_chrome_trace,
    unavailable,
)

PROFILES = FIXTURES / "profiles"
OWN = ["stitch_ew_vec_kernel", "stitch_ew_vec2_kernel", "stitch_ew_scalar_kernel"]


def reports(name: str) -> dict[str, str]:
    """{report name: CSV text} of one fixture recording (files are nsys_<report>.csv)."""
    return {
        path.name[len("nsys_") : -len(".csv")]: path.read_text()
        for path in (PROFILES / "nsys" / name).glob("*.csv")
    }


def test_read_table_skips_the_notices_nsys_prints_above_the_header() -> None:
    text = (
        "Generating SQLite file rep.sqlite from rep.nsys-rep\n"
        "Processing [rep.sqlite] with [/opt/.../cuda_gpu_kern_sum.py]... \n"
        + reports("relu_both")["cuda_gpu_kern_sum"]
    )
    rows = nsys.read_table(text)
    assert len(rows) == 2 and rows[0]["Name"].startswith("void at::native::vectorized_elementwise_kernel")
    assert nsys.read_table("no csv here\n") == []


def test_summary_reports_parse_with_units_from_the_headers() -> None:
    texts = reports("host_sync")
    kernels = nsys.parse_kern_sum(texts["cuda_gpu_kern_sum"])
    # 5 forwards of 24 multiplies each; 'Total Time (ns)' is exact, the average is rounded
    assert kernels[0]["instances"] == 120 and kernels[0]["total_ns"] == 235_744
    assert "MulFunctor" in kernels[0]["name"] and kernels[0]["avg_ns"] == 1964.5
    calls = {r["name"]: r["calls"] for r in nsys.parse_api_sum(texts["cuda_api_sum"])}
    # 3 stream syncs per forward; 1 device sync per forward plus the driver's one after the warm-up
    assert calls["cudaStreamSynchronize"] == 15 and calls["cudaDeviceSynchronize"] == 6
    sizes = nsys.parse_mem_size_sum(texts["cuda_gpu_mem_size_sum"])
    assert sizes["DtoH"] == {"count": 10.0, "bytes": pytest.approx(20.972e6)}  # 'Total (MB)' is 10^6 bytes
    times = nsys.parse_mem_time_sum(texts["cuda_gpu_mem_time_sum"])
    assert times["HtoD"]["count"] == 5 and times["HtoD"]["total_ns"] == 1_686_111


def test_traces_parse_with_correlation_ids_and_quoted_names() -> None:
    texts = reports("host_sync")
    activities = nsys.parse_gpu_trace(texts["cuda_gpu_trace"])
    copies = [a for a in activities if a.kind == "memcpy"]
    assert [a.direction for a in copies] == ["DtoH", "DtoH", "HtoD"] * 5
    assert copies[1].bytes == 4_194_000  # nsys prints 4.194 MB for 4 MiB: three decimals
    assert copies[0].bytes == 0  # .item()'s 4 bytes print as 0.000 MB
    assert all(a.correlation is not None for a in activities)
    assert activities[0].name.startswith(
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor<float>, std::array<"
    )  # commas inside the quoted name
    calls = nsys.parse_api_trace(texts["cuda_api_trace"])
    assert calls[0].name == "cuProfilerStart" and calls[2].name == "cudaLaunchKernel"
    (span,) = nsys.parse_nvtx_trace(texts["nvtx_pushpop_trace"])
    assert span.name == ":stitch:candidate" and span.end_ns > span.start_ns


def test_one_recording_of_both_targets_is_split_by_their_ranges() -> None:
    texts = reports("relu_both")
    ref = nsys.summary_from_reports(texts, target="reference", iters=5, own_kernels=[], require_range=True)
    cand = nsys.summary_from_reports(texts, target="candidate", iters=5, own_kernels=OWN, require_range=True)
    assert ref["status"] == cand["status"] == "ok"
    assert ref["kernel_count"] == cand["kernel_count"] == 1.0
    assert ref["top_kernels"][0]["name"].startswith("void at::native::vectorized_elementwise_kernel")
    assert cand["top_kernels"][0]["name"].startswith("void stitch_ew_vec_kernel<")
    assert cand["own_kernel_share"] == 1.0 and ref["own_kernel_share"] == 0.0
    assert cand["kernel_ms"] == pytest.approx(0.998, abs=1e-3) and ref["kernel_ms"] == pytest.approx(
        1.0069, abs=1e-3
    )
    # The NVTX ranges close after the launches; the kernels still count to their range by correlation.
    assert cand["gpu_busy_pct"] == pytest.approx(94.95, abs=0.01) and ref["gpu_busy_pct"] > 95.0
    assert cand["host_syncs"]["count"] == 0.0  # the driver's cudaDeviceSynchronize is outside the ranges
    assert cand["copies"] == {} == ref["copies"]  # no memcpy: nsys writes empty mem_*_sum reports
    assert cand["wall_ms"] == pytest.approx(ref["wall_ms"], rel=0.01)  # both at the DRAM roof


def test_without_ranges_a_two_target_recording_fails_instead_of_mixing() -> None:
    texts = dict(reports("relu_both"))
    texts.pop("nvtx_pushpop_trace")
    split = nsys.summary_from_reports(texts, target="candidate", iters=5, require_range=True)
    assert split["status"] == "failed" and "stitch:candidate" in split["reason"]
    whole = nsys.summary_from_reports(texts, target="candidate", iters=5)
    assert whole["status"] == "ok" and "whole capture" in whole["reason"]
    assert whole["kernel_count"] == 2.0  # both targets' kernels: why the split needs the ranges


def test_host_sync_program_summary() -> None:
    summary = nsys.summary_from_reports(reports("host_sync"), target="candidate", iters=5)
    assert summary["status"] == "ok" and summary["source"] == "nsys"
    assert summary["kernel_count"] == 26.0 and summary["launch_calls"] == 26.0
    # .item(), .cpu() and the pageable copy back each wait on the stream; then cuda.synchronize()
    assert summary["host_syncs"] == {
        "count": 4.0,
        "calls": {"cudaDeviceSynchronize": 1.0, "cudaStreamSynchronize": 3.0},
    }
    assert summary["copies"]["DtoH"]["count"] == 2.0 and summary["copies"]["HtoD"]["count"] == 1.0
    assert summary["copies"]["HtoD"]["bytes"] == pytest.approx(4.194e6)
    assert summary["gpu_busy_pct"] == pytest.approx(18.36, abs=0.01)
    assert summary["launch_gaps"]["max_us"] > 1000  # the CPU-side work between the copies
    assert summary["top_kernels"][0]["calls"] == 24.0


def test_summary_reports_alone_give_a_degraded_whole_capture_summary() -> None:
    texts = {k: v for k, v in reports("host_sync").items() if not k.endswith("trace")}
    summary = nsys.summary_from_reports(texts, target="candidate", iters=5)
    assert summary["status"] == "degraded" and "gpu_busy_pct" not in summary
    assert summary["kernel_count"] == 26.0
    assert summary["host_syncs"]["calls"]["cudaDeviceSynchronize"] == 1.2  # the driver's own sync is in
    assert nsys.summary_from_reports({}, target="candidate", iters=2)["status"] == "failed"


def test_pytorch_profiler_trace_gives_the_program_level_summary() -> None:
    # The real trace (torch 2.11, H200) records 5 forwards of host_sync_candidate.py.
    timeline = timeline_from_chrome_trace((PROFILES / "torch" / "host_sync.trace.json").read_text())
    torch_summary = summarize(timeline, source="torch_profiler", target="candidate", iters=5)
    nsys_summary = nsys.summary_from_reports(reports("host_sync"), target="candidate", iters=5)
    assert torch_summary["source"] == "torch_profiler" and torch_summary["status"] == "ok"
    for key in ("kernel_count", "launch_calls"):  # 24 tiny kernels, .abs() and a max reduction
        assert torch_summary[key] == nsys_summary[key] == 26.0, key
    # .item(), .cpu() and the pageable copy back each wait on the stream; then cuda.synchronize().
    assert (
        torch_summary["host_syncs"]
        == nsys_summary["host_syncs"]
        == {
            "count": 4.0,
            "calls": {"cudaDeviceSynchronize": 1.0, "cudaStreamSynchronize": 3.0},
        }
    )
    assert torch_summary["copies"]["DtoH"] == {
        "count": 2.0,
        "bytes": 4_194_308.0,
        "ms": pytest.approx(0.643, abs=1e-3),
    }
    assert torch_summary["copies"]["HtoD"]["count"] == nsys_summary["copies"]["HtoD"]["count"] == 1.0
    assert torch_summary["copies"]["HtoD"]["bytes"] == 4_194_304.0  # exact bytes: torch records them
    assert torch_summary["gpu_busy_pct"] == pytest.approx(12.08, abs=0.01)
    assert torch_summary["launch_gaps"]["max_us"] > 1000  # the CPU-side work between the copies
    assert torch_summary["top_kernels"][0]["calls"] == 24.0


def test_stragglers_of_the_warm_up_do_not_count_in_the_range() -> None:
    timeline = Timeline(
        activities=[
            GpuActivity("kernel", "warm", 100, 50, correlation=1),  # launched before the range
            GpuActivity("kernel", "k", 400, 100, correlation=2),
            GpuActivity("kernel", "k", 520, 100, correlation=3),
        ],
        api_calls=[
            ApiCall("cudaLaunchKernel", 90, 5, 1),
            ApiCall("cudaLaunchKernel", 300, 5, 2),
            ApiCall("cuLaunchKernel_ptsz", 310, 5, 3),
        ],
        ranges=[Span("stitch:candidate", 250, 330)],
    )
    summary = summarize(timeline, source="nsys", target="candidate", iters=2)
    assert summary["kernel_count"] == 1.0 and summary["launch_calls"] == 1.0
    assert summary["gpu_busy_pct"] == pytest.approx(100 * 200 / 370, abs=0.01)
    assert summary["launch_gaps"]["max_us"] == pytest.approx(0.02)


def test_copy_directions_are_read_from_either_tools_names() -> None:
    assert copy_kind("[CUDA memcpy Host-to-Device]") == "HtoD"
    assert copy_kind("Memcpy DtoH (Device -> Pageable)") == "DtoH"
    assert copy_kind("[CUDA memset]") == "memset"
    assert copy_kind("[CUDA memcpy Peer-to-Peer]") == "PtoP"


def test_record_and_stats_commands(tmp_path: Path) -> None:
    record = nsys.record_command("nsys", tmp_path / "rep", ["python", "-m", "tools.profilers.target"])
    assert "--capture-range=cudaProfilerApi" in record and "--trace=cuda,nvtx" in record
    assert "--cuda-graph-trace=node" in record and record[-3:] == ["python", "-m", "tools.profilers.target"]
    stats = nsys.stats_command("nsys", tmp_path / "rep.nsys-rep", tmp_path / "rep")
    assert [stats[i + 1] for i, a in enumerate(stats) if a == "--report"] == list(nsys.REPORTS)
    assert stats[stats.index("--format") + 1] == "csv" and stats[-1].endswith("rep.nsys-rep")


def test_a_qdstrm_without_importer_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    fake_nsys = tmp_path / "bin" / "nsys"
    fake_nsys.parent.mkdir()
    (tmp_path / "rep.qdstrm").write_bytes(b"")
    summaries = nsys.summarize_recording(
        str(fake_nsys), tmp_path / "rep", targets=["candidate"], meta={}, iters=5
    )
    assert summaries["candidate"]["status"] == "failed"
    assert "QdstrmImporter" in summaries["candidate"]["reason"]
    empty = nsys.summarize_recording(str(fake_nsys), tmp_path / "none", targets=["a", "b"], meta={}, iters=5)
    assert set(empty) == {"a", "b"} and "neither" in empty["a"]["reason"]


def test_format_summary_is_one_line() -> None:
    line = format_summary(nsys.summary_from_reports(reports("host_sync"), target="candidate", iters=5))
    assert "\n" not in line and "GPU busy 18%" in line and "4 host syncs" in line
    assert "unavailable" in format_summary(unavailable("nsys", "x", "why"))


PROBLEM = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\ndef get_inputs():\n    return [torch.rand(8)]\n\ndef get_init_inputs():\n    return []\n"
CANDIDATE = (
    "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the GPU-less path")
def test_system_profile_without_a_gpu_falls_back_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(nsys.NSYS_ENV, str(tmp_path / "no-nsys"))
    summary = system_profile.system_profile(PROBLEM, CANDIDATE, timeout_s=180, keep_dir=tmp_path / "keep")
    assert summary["source"] == "torch_profiler" and summary["status"] == "no_gpu"
    assert "nsys not found" in summary["fallback_reason"]
    meta = tool_run.read_meta(tmp_path / "keep" / "torch" / "torch-candidate.meta.json")
    assert meta["status"] == "no_gpu" and meta["target"] == "candidate"


def test_driver_reports_a_candidate_that_fails_to_import(tmp_path: Path) -> None:
    files = tool_run.DriverFiles.write(tmp_path, PROBLEM, "raise ValueError('broken at import')\n", "t")
    command = tool_run.driver_command(files, target="candidate", mode="range", iters=1, warmup=1)
    run = tool_run.run_tool(command, timeout_s=180, cwd=tmp_path, env=tool_run.driver_env(tmp_path))
    meta = tool_run.read_meta(files.meta)
    assert run.ok and meta["status"] == "runtime_error" and "broken at import" in meta["message"]
    assert "runtime_error" in (tool_run.meta_failure(meta, run) or "")


def test_graph_nodes_without_a_launch_call_count_until_the_next_targets_range() -> None:
    nodes = [
        GpuActivity("kernel", "node", 400 + 100 * i, 80, correlation=50) for i in range(4)
    ]  # one graph launch
    later = GpuActivity("kernel", "other", 2000, 80, correlation=60)
    timeline = Timeline(
        activities=[*nodes, later],
        api_calls=[ApiCall("cudaGraphLaunch", 300, 10, 40), ApiCall("cudaLaunchKernel", 1990, 5, 60)],
        ranges=[Span("stitch:reference", 250, 320), Span("stitch:candidate", 1900, 1995)],
    )
    ref = summarize(timeline, source="nsys", target="reference", iters=1, require_range=True)
    assert ref["kernel_count"] == 4.0 and ref["graph_launches"] == 1.0 and ref["launch_calls"] == 0.0
    cand = summarize(timeline, source="nsys", target="candidate", iters=1, require_range=True)
    assert cand["kernel_count"] == 1.0 and cand["top_kernels"][0]["name"] == "other"
