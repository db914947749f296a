"""The Nsight Compute metric set and the typed records read from its raw CSV page.

Why apart from running ncu: the diagnosis, the reports and the tests read saved profiles
(`NcuResult.from_dict`, `parse_records` on a raw CSV) without ncu or a GPU. `FIELD_METRICS` maps each
record field to the metric names that may carry it (first present wins); tools.profilers.ncu asks
for `EXTRA_METRICS` beyond the three SECTIONS. Standard library only.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from tools.worker.kernel_names import base_name

DEFAULT_LAUNCH_COUNT = 40
SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy")
STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "mio_throttle",
    "lg_throttle",
    "barrier",
    "membar",
    "math_pipe_throttle",
    "wait",
    "not_selected",
    "selected",
    "dispatch_stall",
    "no_instruction",
    "branch_resolving",
    "drain",
    "imc_miss",
    "tex_throttle",
    "sleeping",
    "misc",
)


def stall_metric(reason: str) -> str:
    """Warps stalled for `reason` per issued instruction (the Warp State Statistics chart)."""
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


# Record field -> metric names, first present wins. Section metrics come with SECTIONS; EXTRA_METRICS
# are asked for with --metrics.
FIELD_METRICS: dict[str, tuple[str, ...]] = {
    "duration_ns": ("gpu__time_duration.sum",),
    "sm_throughput_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "memory_throughput_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_throughput_pct": (
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "registers_per_thread": ("launch__registers_per_thread",),
    "static_smem_per_block": ("launch__shared_mem_per_block_static",),
    "dynamic_smem_per_block": ("launch__shared_mem_per_block_dynamic",),
    "block_size": ("launch__block_size",),
    "grid_size": ("launch__grid_size",),
    "waves_per_sm": ("launch__waves_per_multiprocessor",),
    "limit_registers": ("launch__occupancy_limit_registers",),
    "limit_shared_mem": ("launch__occupancy_limit_shared_mem",),
    "limit_warps": ("launch__occupancy_limit_warps",),
    "limit_blocks": ("launch__occupancy_limit_blocks",),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
    "global_load_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "global_load_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",),
    "global_store_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",),
    "global_store_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",),
    "global_load_bytes_per_sector_pct": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",),
    "global_store_bytes_per_sector_pct": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",),
    "local_load_sectors": ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",),
    "local_store_sectors": ("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",),
    "shared_load_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",),
    "shared_store_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",),
    "shared_load_bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
    "shared_store_bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",),
    "dram_bytes_read": ("dram__bytes_read.sum",),
    "dram_bytes_write": ("dram__bytes_write.sum",),
    "issue_active_pct": ("smsp__issue_active.avg.pct_of_peak_sustained_active",),
    "fma_pipe_pct": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",),
    "branch_uniformity_pct": ("smsp__sass_average_branch_targets_threads_uniform.pct",),
    "branch_instructions": ("smsp__sass_inst_executed_op_branch.sum",),
    "threads_per_instruction": (
        "smsp__average_thread_inst_executed_per_inst_executed.ratio",
        "smsp__thread_inst_executed_per_inst_executed.ratio",  # the deprecated name of the same ratio
    ),
    # fp32 thread instructions by kind: the kernel's FLOP count for a true kernel roofline (an FFMA is 2)
    "fadd_thread_inst": ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",),
    "fmul_thread_inst": ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",),
    "ffma_thread_inst": ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",),
}
TENSOR_PIPE_METRICS = (
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
)
SECTION_METRICS = frozenset(
    FIELD_METRICS[f][0]
    for f in (
        "duration_ns",
        "sm_throughput_pct",
        "memory_throughput_pct",
        "dram_throughput_pct",
        "achieved_occupancy_pct",
        "theoretical_occupancy_pct",
        "registers_per_thread",
        "static_smem_per_block",
        "dynamic_smem_per_block",
        "block_size",
        "grid_size",
        "waves_per_sm",
        "limit_registers",
        "limit_shared_mem",
        "limit_warps",
        "limit_blocks",
    )
)
EXTRA_METRICS: tuple[str, ...] = tuple(
    [names[0] for names in FIELD_METRICS.values() if names[0] not in SECTION_METRICS]
    + list(TENSOR_PIPE_METRICS)
    + [stall_metric(r) for r in STALL_REASONS]
)
_UNIT_SCALE = {
    "nsecond": 1.0,
    "ns": 1.0,
    "usecond": 1e3,
    "us": 1e3,
    "msecond": 1e6,
    "ms": 1e6,
    "second": 1e9,
    "s": 1e9,
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "kibyte": 1024.0,
    "mibyte": 1024.0**2,
}
_TIME_FIELDS = {"duration_ns"}
_BYTE_FIELDS = {"static_smem_per_block", "dynamic_smem_per_block", "dram_bytes_read", "dram_bytes_write"}


@dataclass
class KernelMetrics:
    """One profiled kernel launch. None means ncu did not report that metric (not that it was 0)."""

    id: int
    name: str
    base_name: str
    block: str = ""
    grid: str = ""
    duration_ns: float | None = None
    sm_throughput_pct: float | None = None
    memory_throughput_pct: float | None = None
    dram_throughput_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    registers_per_thread: float | None = None
    static_smem_per_block: float | None = None
    dynamic_smem_per_block: float | None = None
    block_size: float | None = None
    grid_size: float | None = None
    waves_per_sm: float | None = None
    limit_registers: float | None = None
    limit_shared_mem: float | None = None
    limit_warps: float | None = None
    limit_blocks: float | None = None
    l1_hit_pct: float | None = None
    l2_hit_pct: float | None = None
    global_load_sectors: float | None = None
    global_load_requests: float | None = None
    global_store_sectors: float | None = None
    global_store_requests: float | None = None
    global_load_bytes_per_sector_pct: float | None = None
    global_store_bytes_per_sector_pct: float | None = None
    local_load_sectors: float | None = None
    local_store_sectors: float | None = None
    shared_load_wavefronts: float | None = None
    shared_store_wavefronts: float | None = None
    shared_load_bank_conflicts: float | None = None
    shared_store_bank_conflicts: float | None = None
    dram_bytes_read: float | None = None
    dram_bytes_write: float | None = None
    issue_active_pct: float | None = None
    fma_pipe_pct: float | None = None
    branch_uniformity_pct: float | None = None
    branch_instructions: float | None = None
    threads_per_instruction: float | None = None
    fadd_thread_inst: float | None = None
    fmul_thread_inst: float | None = None
    ffma_thread_inst: float | None = None
    tensor_pipe_pct: float | None = None
    stalls: dict[str, float] = field(default_factory=dict)

    # -- derived ---------------------------------------------------------------------------------

    @property
    def global_load_sectors_per_request(self) -> float | None:
        return _ratio(self.global_load_sectors, self.global_load_requests)

    @property
    def global_store_sectors_per_request(self) -> float | None:
        return _ratio(self.global_store_sectors, self.global_store_requests)

    @property
    def shared_mem_per_block(self) -> float | None:
        if self.static_smem_per_block is None and self.dynamic_smem_per_block is None:
            return None
        return (self.static_smem_per_block or 0.0) + (self.dynamic_smem_per_block or 0.0)

    @property
    def bank_conflict_ratio(self) -> float | None:
        """The share of shared-memory wavefronts that are bank-conflict replays (0: none, ~0.97: 32-way)."""
        conflicts = (self.shared_load_bank_conflicts or 0.0) + (self.shared_store_bank_conflicts or 0.0)
        wavefronts = (self.shared_load_wavefronts or 0.0) + (self.shared_store_wavefronts or 0.0)
        if self.shared_load_wavefronts is None and self.shared_store_wavefronts is None:
            return None
        return conflicts / wavefronts if wavefronts > 0 else 0.0

    @property
    def simt_efficiency(self) -> float | None:
        """Active threads per executed instruction over the most a warp of this block can have (1.0: none idle).

        Divergence masks lanes off; so does a block size that is not a multiple of 32, which is
        allowed for here, so only divergence (and the grid's last partial warps) lowers it.
        """
        if self.threads_per_instruction is None:
            return None
        most = 32.0
        if self.block_size:
            warps = math.ceil(self.block_size / 32.0)
            most = self.block_size / warps
        return min(1.0, self.threads_per_instruction / most) if most > 0 else None

    @property
    def branch_uniformity_evidence(self) -> float | None:
        """Branch uniformity where branches ran: ncu prints 0% for a kernel with no branch instructions."""
        uniform = self.branch_uniformity_pct
        if uniform is None or self.branch_instructions == 0:
            return None
        if self.branch_instructions is None and uniform == 0.0:  # older records: 0% is no evidence
            return None
        return uniform

    @property
    def local_sectors(self) -> float | None:
        if self.local_load_sectors is None and self.local_store_sectors is None:
            return None
        return (self.local_load_sectors or 0.0) + (self.local_store_sectors or 0.0)

    @property
    def dram_bytes(self) -> float | None:
        if self.dram_bytes_read is None and self.dram_bytes_write is None:
            return None
        return (self.dram_bytes_read or 0.0) + (self.dram_bytes_write or 0.0)

    @property
    def fp32_flops(self) -> float | None:
        """fp32 FLOPs the kernel executed (FADD + FMUL + 2 x FFMA), None when ncu reported none of them."""
        counts = (self.fadd_thread_inst, self.fmul_thread_inst, self.ffma_thread_inst)
        if all(c is None for c in counts):
            return None
        return (counts[0] or 0.0) + (counts[1] or 0.0) + 2.0 * (counts[2] or 0.0)

    @property
    def occupancy_limiter(self) -> str | None:
        """Which resource caps the blocks per SM: registers, shared_mem, warps or blocks."""
        limits = {
            "registers": self.limit_registers,
            "shared_mem": self.limit_shared_mem,
            "warps": self.limit_warps,
            "blocks": self.limit_blocks,
        }
        known = {k: v for k, v in limits.items() if v is not None}
        if not known:
            return None
        return min(known, key=lambda k: (known[k], list(limits).index(k)))

    def top_stalls(self, count: int = 3) -> list[tuple[str, float, float]]:
        """(reason, warps stalled per issued instruction, share of all stalls), largest first."""
        stalls = {k: v for k, v in self.stalls.items() if k != "selected" and v > 0}
        total = sum(stalls.values())
        ranked = sorted(stalls.items(), key=lambda kv: -kv[1])[:count]
        return [(k, v, v / total if total else 0.0) for k, v in ranked]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["derived"] = {
            "global_load_sectors_per_request": self.global_load_sectors_per_request,
            "global_store_sectors_per_request": self.global_store_sectors_per_request,
            "shared_mem_per_block": self.shared_mem_per_block,
            "bank_conflict_ratio": self.bank_conflict_ratio,
            "simt_efficiency": self.simt_efficiency,
            "local_sectors": self.local_sectors,
            "fp32_flops": self.fp32_flops,
            "occupancy_limiter": self.occupancy_limiter,
            "top_stalls": [list(s) for s in self.top_stalls()],
        }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelMetrics:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


@dataclass
class NcuResult:
    """One ncu run: a status ("ok", "unavailable", "no_permission", "no_kernels", "no_gpu", "failed",
    "timeout"), why, and the per-launch records when there are any."""

    status: str
    reason: str = ""
    target: str = ""
    device: str = ""
    kernels: list[KernelMetrics] = field(default_factory=list)
    launch_count: int = DEFAULT_LAUNCH_COUNT
    truncated: bool = False  # ncu stopped at launch_count: later kernels were not profiled
    metrics_dropped: list[str] = field(default_factory=list)  # asked for but unknown to this ncu/GPU
    metrics_missing: list[str] = field(default_factory=list)  # fields no kernel reported
    seconds: float = 0.0
    tool: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.kernels)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kernels"] = [k.to_dict() for k in self.kernels]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NcuResult:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["kernels"] = [KernelMetrics.from_dict(k) for k in data.get("kernels", [])]
        return cls(**values)


def _number(text: str) -> float | None:
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned.lower() in ("n/a", "nan", "(!) n/a"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list[dict[str, tuple[str, str]]]:
    """`ncu --csv --page raw` -> one dict per launch: column -> (unit, value as printed).

    The header row starts with "ID" and holds the fixed columns (Kernel Name, Block Size, ...) then
    one column per metric; the row after it holds the units. Lines ncu itself prints (==PROF==,
    ==WARNING==) are skipped wherever they are.
    """
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    for index, line in enumerate(lines):
        if line.startswith('"ID"'):
            rows = list(csv.reader(io.StringIO("\n".join(lines[index:]))))
            break
    else:
        return []
    header, rest = rows[0], rows[1:]
    units = [""] * len(header)
    if rest and rest[0] and not rest[0][0].strip():  # the units row has an empty ID
        units = rest[0] + [""] * (len(header) - len(rest[0]))
        rest = rest[1:]
    parsed = []
    for row in rest:
        if len(row) < 2 or not row[0].strip():
            continue
        parsed.append({name: (units[i], row[i] if i < len(row) else "") for i, name in enumerate(header)})
    return parsed


def _scaled(unit: str, value: str, field_name: str) -> float | None:
    number = _number(value)
    if number is None:
        return None
    if field_name in _TIME_FIELDS or field_name in _BYTE_FIELDS:
        return number * _UNIT_SCALE.get(unit.strip().lower(), 1.0)
    return number


def record_from_row(row: dict[str, tuple[str, str]]) -> KernelMetrics:
    """A typed record from one parsed row; columns the row lacks stay None."""
    name = row.get("Kernel Name", ("", ""))[1] or row.get("Function Name", ("", ""))[1]
    values: dict[str, Any] = {}
    for field_name, metrics in FIELD_METRICS.items():
        for metric in metrics:
            if metric in row:
                value = _scaled(*row[metric], field_name)
                if value is not None:
                    values[field_name] = value
                    break
    tensor = [v for m in TENSOR_PIPE_METRICS if m in row and (v := _number(row[m][1])) is not None]
    if tensor:
        values["tensor_pipe_pct"] = max(tensor)
    stalls = {
        r: v
        for r in STALL_REASONS
        if stall_metric(r) in row and (v := _number(row[stall_metric(r)][1])) is not None
    }
    raw_id = _number(row.get("ID", ("", ""))[1])
    return KernelMetrics(
        id=int(raw_id) if raw_id is not None else -1,
        name=name,
        base_name=base_name(name),
        block=row.get("Block Size", ("", ""))[1],
        grid=row.get("Grid Size", ("", ""))[1],
        stalls=stalls,
        **values,
    )


def parse_records(text: str) -> list[KernelMetrics]:
    """Every launch in a raw-page CSV as a KernelMetrics, in profiling order."""
    return [record_from_row(row) for row in parse_raw_csv(text)]


def missing_fields(records: list[KernelMetrics]) -> list[str]:
    """Record fields that no launch reported (a metric this ncu or GPU did not give)."""
    names = [*FIELD_METRICS, "tensor_pipe_pct"]
    return [n for n in names if all(getattr(r, n) is None for r in records)] + (
        ["stalls"] if records and not any(r.stalls for r in records) else []
    )


def kernel_groups(records: list[KernelMetrics]) -> list[dict[str, Any]]:
    """Launches grouped by kernel name: calls, total time, share, and the longest launch as exemplar."""
    groups: dict[str, list[KernelMetrics]] = {}
    for record in records:
        groups.setdefault(record.name, []).append(record)
    total = sum(r.duration_ns or 0.0 for r in records)
    rows = []
    for name, launches in groups.items():
        time_ns = sum(r.duration_ns or 0.0 for r in launches)
        exemplar = max(launches, key=lambda r: r.duration_ns or 0.0)
        rows.append(
            {
                "name": name,
                "base_name": exemplar.base_name,
                "calls": len(launches),
                "total_ns": time_ns,
                "share": time_ns / total if total else 0.0,
                "exemplar": exemplar,
            }
        )
    return sorted(rows, key=lambda g: -g["total_ns"])
