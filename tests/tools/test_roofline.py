"""tools.roofline: SOL arithmetic, precision modes, the ceilings cache, kernel classification."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES

from tools import roofline
from tools.profilers import ncu
from tools.roofline import Ceilings, work_floor_ms

CEILINGS = Ceilings(
    "Test GPU", copy_bandwidth=4e12, fp32_flops=50e12, tf32_flops=400e12, bf16_flops=800e12, source="measured"
)


def test_memory_bound_problem_sol_is_bytes_over_bandwidth() -> None:
    sol = roofline.speed_of_light(536_870_912, 4_294_967_296, CEILINGS)  # ReLU, 16384 x 32768 fp32
    assert sol.bound == "memory"
    assert sol.sol_ms == pytest.approx(4_294_967_296 / 4e12 * 1e3)
    assert sol.pct_of_sol(2 * sol.sol_ms) == pytest.approx(50.0)
    assert sol.pct_of_sol(None) is None and sol.pct_of_sol(0.0) is None


def test_compute_bound_problem_uses_the_rate_of_its_precision() -> None:
    flops, nbytes = 137_438_953_472, 201_326_592  # 4096^3 matmul
    fp32 = roofline.speed_of_light(flops, nbytes, CEILINGS, "fp32")
    tf32 = roofline.speed_of_light(flops, nbytes, CEILINGS, "tf32")
    assert fp32.bound == tf32.bound == "compute"
    assert fp32.sol_ms == pytest.approx(flops / 50e12 * 1e3)
    assert tf32.sol_ms == pytest.approx(fp32.sol_ms / 8)
    assert fp32.intensity == pytest.approx(flops / nbytes)
    described = fp32.describe(3.0)
    assert "compute-bound" in described and "of SOL" in described and "fp32" in described


def test_precision_mode_follows_dtype_and_tf32_switch() -> None:
    assert roofline.precision_mode("float32") == "fp32"
    assert roofline.precision_mode("torch.float32", allow_tf32=True) == "tf32"
    assert roofline.precision_mode("bfloat16") == "bf16"
    assert roofline.precision_mode("float16") == "fp16"
    assert CEILINGS.rate("fp16") == CEILINGS.bf16_flops
    with pytest.raises(ValueError, match="unknown precision"):
        CEILINGS.rate("int8")


def test_sol_dict_carries_measured_time_and_percentage() -> None:
    data = roofline.speed_of_light(0, 4_000_000, CEILINGS).to_dict(measured_ms=0.002)
    assert data["sol_ms"] == pytest.approx(0.001) and data["pct_of_sol"] == pytest.approx(50.0)
    assert data["bound"] == "memory" and data["gpu"] == "Test GPU"


def test_ceilings_cache_is_keyed_by_gpu_name(tmp_path: Path) -> None:
    cache = tmp_path / "ceilings.json"
    roofline.save_cache(CEILINGS, cache)
    roofline.save_cache(Ceilings("Other GPU", 1e12, 1e13, 2e13, 3e13, "measured"), cache)
    loaded = roofline.load_cache(cache)
    assert set(loaded) == {"Test GPU", "Other GPU"} and loaded["Test GPU"].fp32_flops == 50e12
    found = roofline.device_ceilings("Test GPU", cache=cache)
    assert found.copy_bandwidth == 4e12 and found.source.startswith("cache (measured")


def test_known_and_fallback_ceilings_say_they_are_assumed(tmp_path: Path) -> None:
    empty = tmp_path / "none.json"
    h200 = roofline.device_ceilings("NVIDIA H200", cache=empty)
    assert h200.fp32_flops == 51e12 and h200.source.startswith("assumed")
    unknown = roofline.device_ceilings("NVIDIA Mystery", cache=empty)
    assert unknown.gpu == "NVIDIA Mystery" and "no measurement for NVIDIA Mystery" in unknown.source
    assert "docs/hardware.md" in unknown.source  # the repository's own page of the H200 figures
    assert roofline.device_ceilings(None, cache=empty).gpu == "NVIDIA H200"


def test_a_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    cache = tmp_path / "ceilings.json"
    cache.write_text("{not json")
    assert roofline.load_cache(cache) == {}
    assert roofline.device_ceilings("NVIDIA H200", cache=cache).source.startswith("assumed")


def _records(name: str) -> list[ncu.KernelMetrics]:
    return ncu.parse_records((FIXTURES / "profiles" / "ncu" / name).read_text())


def test_kernels_are_classified_from_their_ncu_records() -> None:
    (relu,) = _records("relu_candidate.raw.csv")
    assert roofline.classify_kernel(relu)[0] == "memory-bound"
    (gemm,) = _records("matmul_reference.raw.csv")
    cls, why = roofline.classify_kernel(gemm)
    assert cls == "compute-bound" and "SM 87%" in why
    tiny = _records("recurrent_reference.raw.csv")[1]
    cls, why = roofline.classify_kernel(tiny)
    assert cls == "latency-bound" and "too short" in why
    by_name = {k.base_name: k for k in _records("bad_kernels_candidate.raw.csv")}
    assert roofline.classify_kernel(by_name["smem_hog"])[0] == "latency-bound"
    assert roofline.classify_kernel(by_name["transpose_naive"])[0] == "memory-bound"


def test_a_record_without_throughput_metrics_is_unknown() -> None:
    record = ncu.KernelMetrics(id=0, name="k", base_name="k", duration_ns=1000.0)
    assert roofline.classify_kernel(record) == ("unknown", "no throughput metrics in the record")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the GPU-less path")
def test_measuring_without_a_gpu_returns_nothing(tmp_path: Path) -> None:
    assert roofline.measure_in_subprocess(cache=tmp_path / "c.json", timeout_s=120) is None
    assert not (tmp_path / "c.json").exists()


def test_the_impossible_speed_floor_is_half_the_sol_at_the_fastest_rate(tmp_path: Path) -> None:
    h200 = roofline.KNOWN["NVIDIA H200"]
    relu = 2 * 4 * 4096 * 16384  # fp32 read + write, 64 Mi elements
    assert roofline.floor_ms(0, relu, h200) == pytest.approx(0.5 * relu / h200.copy_bandwidth * 1e3)
    gemm = 2 * 8192**3
    assert roofline.floor_ms(gemm, 0, h200) == pytest.approx(0.5 * gemm / h200.bf16_flops * 1e3)
    assert roofline.known_ceilings("NVIDIA H200", tmp_path / "none.json") == h200
    assert roofline.known_ceilings("Some Future GPU", tmp_path / "none.json") is None


def test_the_floor_is_derived_only_for_known_gpus_and_real_work() -> None:
    assert work_floor_ms((0, 8 << 20), "NVIDIA H200") == pytest.approx(
        roofline.floor_ms(0, 8 << 20, roofline.KNOWN["NVIDIA H200"])
    )
    assert work_floor_ms((0, 0), "NVIDIA H200") is None
    assert work_floor_ms((10**9, 8 << 20), "Some Future GPU") is None
