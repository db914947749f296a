"""evals/device/ncu_side_by_side.py on the CPU: the ncu command it builds and the table row it prints."""

from __future__ import annotations

from pathlib import Path

from evals.device import ncu_side_by_side as sbs
from tools.profilers.ncu_records import KernelMetrics


def test_each_side_is_profiled_inside_its_own_nvtx_range() -> None:
    command = sbs.ncu_command(
        "ncu", "compiled", ["dram__bytes_read.sum"], Path("r.ncu-rep"), ["python3", "x.py"]
    )
    assert command[command.index("--nvtx-include") + 1] == "measure/compiled/"
    assert command[command.index("--metrics") + 1] == "dram__bytes_read.sum"
    assert command[-2:] == ["python3", "x.py"]  # the target last, after every ncu option
    assert "--clock-control" in command and command[command.index("--clock-control") + 1] == "none"


def test_a_row_reports_bandwidth_from_the_dram_bytes_and_the_leading_stalls_first() -> None:
    kernel = KernelMetrics(
        id=0,
        name="k",
        base_name="stitch_pool_kernel",
        duration_ns=500_000.0,
        dram_bytes_read=1.0e9,
        dram_bytes_write=0.5e9,
        dram_throughput_pct=80.0,
        issue_active_pct=60.0,
        achieved_occupancy_pct=85.0,
        registers_per_thread=32.0,
        global_load_sectors=800.0,
        global_load_requests=100.0,
        stalls={"wait": 1.0, "long_scoreboard": 12.0, "lg_throttle": 3.0, "barrier": 0.5},
    )
    cells = [c.strip() for c in sbs.row("level1/10", "candidate", kernel).strip("| ").split("|")]
    assert cells[:4] == ["level1/10", "candidate", "stitch_pool_kernel", "500.0"]
    assert cells[4] == "3000"  # 1.5 GB in 0.5 ms
    assert cells[9] == "8.0"  # sectors a load request
    assert cells[10] == "long_scoreboard:12.0 lg_throttle:3.0 wait:1.0"
