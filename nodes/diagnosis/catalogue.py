"""The diagnosis's rules as data: per finding, its note tags, thresholds, weight, title and advice.

Why a table: the rule functions (`program_rules`, `kernel_rules`) only measure; what a finding is
called, when it fires (`limits`), how much of the time at stake a fix can win (`weight`), what it
advises, and the tags its guidance is retrieved by (`symptoms` and `metrics`, the same vocabulary as
the guidance notes' front matter) live here, once, side by side. Titles, advice and metric names are
`str.format` templates filled from the finding's numbers. A rule with several wordings keeps one row
per variant (`finding/variant`), made from its base row so only what differs is written twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from graph.artifacts import Finding


@dataclass(frozen=True)
class Rule:
    """One finding kind (or one variant of it), as data."""

    finding: str  # the finding id reports show, e.g. "launch-bound"
    title: str  # template
    symptoms: tuple[str, ...]  # note tags: what a profile shows, as the guidance notes say it
    metrics: tuple[str, ...]  # note tags: the profiler metrics that reveal it (templates)
    advice: tuple[str, ...] = ()  # templates, most useful first
    weight: float = 1.0  # the share of the time at stake a fix can win (impact factor)
    limits: Mapping[str, float] = field(default_factory=dict)  # the thresholds its rule function reads
    variant: str = ""
    label: str = ""  # a variant's short cause, available to the title as {label}

    @property
    def key(self) -> str:
        return f"{self.finding}/{self.variant}" if self.variant else self.finding

    def make(
        self,
        impact: float,
        evidence: dict[str, Any],
        kernel: str = "",
        *,
        symptoms: Sequence[str] | None = None,
        metrics: Sequence[str] | None = None,
        advice: Sequence[str] | None = None,
        **values: Any,
    ) -> Finding:
        """The Finding this row describes, its templates filled from `values` (overrides win)."""
        values.setdefault("label", self.label)
        return Finding(
            rule=self.finding,
            title=self.title.format(**values),
            impact=impact,
            evidence=evidence,
            symptoms=list(self.symptoms if symptoms is None else symptoms),
            metrics=[m.format(**values) for m in self.metrics] if metrics is None else list(metrics),
            advice=[a.format(**values) for a in self.advice] if advice is None else list(advice),
            kernel=kernel,
        )


SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_THROUGHPUT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_THROUGHPUT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
FMA_PIPE = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_METRIC = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
STALL_METRIC = "smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"
OCCUPANCY_CAP = "sm__maximum_warps_per_active_cycle_pct"

# ---- program-level findings ------------------------------------------------------------------

LAUNCH_BOUND = Rule(
    "launch-bound",
    "launch-bound: the GPU is idle {idle:.0%} of the forward around {kernels:g} kernel launches",
    ("GPU idle between kernels", "many short kernels", "launch overhead dominates", "low GPU busy"),
    ("gpu busy %", "launch gaps", "kernels per forward", "mean kernel duration"),
    (
        "Capture the whole forward into one CUDA graph and replay it (static input and output buffers, "
        "copy inputs in, clone the output): one launch instead of {kernels:g}.",
        "Fuse the {kernels:g} short kernels into fewer, longer ones so each launch does more work.",
    ),
    weight=0.9,
    # Fires at >= 25% idle, unless there are fewer than 3 kernels that each run longer than 20 us.
    limits={"idle": 0.25, "few_kernels": 3, "long_kernel_us": 20},
)

HOST_BOUND = Rule(
    "host-bound",
    "host-bound: a call spends {issue_us:.0f} us on the host before it returns ({share:.0%} of the "
    "forward), {excess_us:.0f} us more than eager",
    (
        "CPU launch time exceeds GPU kernel time",
        "launch overhead dominates",
        "GPU idle while the host issues the call",
    ),
    ("host time per call", "cuda_api_sum"),
    (
        "Capture the whole forward into one CUDA graph and replay it: the library calls' host work "
        "(descriptor set-up, algorithm and plan look-ups, allocations) then happens once at capture, and a "
        "call costs one graph launch plus the input copies.",
        "Keep per-call host work out of forward: build descriptors and plans once, allocate only the outputs.",
    ),
    weight=0.9,
    # The timed loop synchronises before every call, so the host time until the first launch is idle GPU
    # time inside the candidate's time. Fires when the call's host time is >= 8% of the forward and
    # >= 25 us above eager's (eager's own host time is the floor PyTorch pays as well).
    limits={"share": 0.08, "excess_us": 25.0},
)

HOST_SYNC = Rule(
    "host-sync",
    "host synchronisation inside the forward: {count:g} sync(s) and {dtoh:g} device-to-host copies per forward",
    (
        "host synchronization inside forward",
        "cudaStreamSynchronize or .item() or .cpu() calls",
        "GPU idle while the host waits",
        "device to host copy",
    ),
    ("cudaStreamSynchronize calls", "cudaDeviceSynchronize calls", "DtoH memcpy count"),
    (
        "Remove every host round trip from forward: no .item(), .cpu(), .tolist(), print of a tensor or "
        "torch.cuda.synchronize(); keep scalars on the device and let the stream order the work.",
    ),
    limits={"events": 1, "floor": 0.1, "cap": 0.9},  # impact: the idle fraction, clamped
)

HOST_TRANSFERS = Rule(
    "host-transfers",
    "host<->device copies inside the forward: {megabytes:.3g} MB in {ms:.3g} ms per forward",
    (
        "host to device copies in forward",
        "PCIe transfers",
        "pageable memcpy",
        "tensor created on the CPU",
    ),
    ("memcpy HtoD bytes", "memcpy DtoH bytes", "cuda_gpu_mem_size_sum"),
    (
        "Create constants and scratch tensors on the GPU once (in __init__ or cached), never per forward; "
        "if a copy is unavoidable, use pinned memory and non_blocking=True.",
    ),
    limits={"floor": 0.05, "cap": 0.9},  # impact: copy time over the forward, clamped
)

REDUNDANT_PASSES = Rule(
    "redundant-passes",
    "redundant passes over memory: the kernels move {ratio:.1f}x the minimum bytes",
    (
        "redundant passes over memory",
        "intermediate tensors written and read back",
        "DRAM bytes exceed the minimum",
    ),
    ("dram__bytes_read.sum", "dram__bytes_write.sum", "minimum bytes"),
    (
        "Fuse the kernels that read and write the same data into one pass (keep intermediates in "
        "registers or shared memory); the minimum traffic is {minimum_mb:.4g} MB per forward.",
    ),
    # ratio: measured DRAM bytes over the plan's minimum; the program must be memory-bound or its
    # memory-bound kernels take >= 30% of kernel time; a memory-bound SOL weighs at least 0.5.
    limits={"ratio": 1.5, "memory_share": 0.3, "memory_bound_weight": 0.5},
)

NO_TENSOR_CORES = Rule(
    "no-tensor-cores",
    "GEMM-heavy problem not using the tensor cores although {precision} allows them",
    ("GEMM on FP32 pipes", "no tensor core usage", "tensor pipe idle", "compute-bound matmul"),
    (TENSOR_METRIC, FMA_PIPE),
    ("Run the GEMMs on the tensor cores in {precision} (cuBLASLt compute type, WMMA/wgmma).",),
    weight=0.7,
    limits={"gemm_share": 0.5, "tensor_pipe_pct": 5.0},  # GEMM FLOPs >= 50%, tensor pipe < 5%
)
NO_TENSOR_CORES_FP32 = replace(
    NO_TENSOR_CORES,
    variant="fp32",
    title="GEMM-heavy problem on the FP32 pipes: tensor cores need TF32/BF16, which the fp32 tolerance excludes",
    advice=(
        "Keep plain fp32 (TF32 alone fails 1e-4): make the GEMM reach the SGEMM ceiling (cuBLASLt with "
        "an epilogue, tiles in shared memory, register blocking); a split-precision 3xTF32 product can use "
        "the tensor cores at near-fp32 accuracy, but check it against the tolerance.",
    ),
    weight=0.15,
)

SOL_GAP = Rule(
    "sol-gap",
    "{pct} of speed of light for a {bound}-bound problem",
    ("memory-bound kernel below peak bandwidth", "minimum bytes", "roofline"),
    (DRAM_THROUGHPUT, SM_THROUGHPUT),
    (
        "The {bound} ceiling allows {sol_ms:.4g} ms; work on the largest kernel until its "
        "{unit} throughput is near peak.",
    ),
    weight=0.3,
)
SOL_GAP_COMPUTE = replace(
    SOL_GAP, variant="compute", symptoms=("compute-bound", "FLOP rate below peak", "roofline")
)

NO_GPU = Rule(
    "no-gpu-profile",
    "profiled without a GPU: no kernel metrics, timeline or speed of light",
    ("no GPU profile",),
    (),
    ("Profile on the GPU to get a diagnosis; meanwhile follow the plan's fusion groups and host plan.",),
    weight=0.0,
)

# ---- kernel-level findings (impact: the kernel's share of the forward x loss x weight) --------

UNCOALESCED = Rule(
    "uncoalesced-access",
    "uncoalesced global {kind}s {where}: {efficiency:.0%} of each fetched sector is used",
    (
        "uncoalesced global memory access",
        "many sectors per request",
        "low bytes used per sector",
        "strided access",
    ),
    (
        "l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum",
        "l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum",
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_{op}.pct",
    ),
    (
        "Make consecutive threads of a warp touch consecutive addresses in {name}'s global {kind}s "
        "(thread index on the fastest-moving dimension); stage transposes or strided gathers through "
        "shared memory so both the global read and write are coalesced.",
    ),
    weight=0.8,
    # efficiency: bytes used per fetched sector, else 16 sectors (a coalesced 128-bit warp access)
    # over the sectors per request when there are more than 16.5
    limits={"efficiency": 0.6, "coalesced_sectors": 16.0, "sectors_per_request": 16.5},
)

BANK_CONFLICTS = Rule(
    "bank-conflicts",
    "shared-memory bank conflicts {where}: {ratio:.0%} of shared wavefronts are conflict replays",
    ("shared memory bank conflicts", "many wavefronts per shared load", "mio throttle stalls"),
    (
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    ),
    (
        "Pad {name}'s shared-memory tile by one element per row (or swizzle the column index) so a "
        "warp's column accesses fall in 32 different banks.",
    ),
    weight=0.8,
    limits={"conflict_share": 0.2, "wavefronts": 1000},
)

LOW_OCCUPANCY_REGISTERS = Rule(
    "low-occupancy-registers",
    "low occupancy from register pressure {where}: {theoretical:.0f}% theoretical at "
    "{registers:.0f} registers/thread",
    ("low theoretical occupancy", "occupancy limited by registers", "high registers per thread"),
    (
        "launch__registers_per_thread",
        "launch__occupancy_limit_registers",
        OCCUPANCY_CAP,
        "sm__warps_active.avg.pct_of_peak_sustained_active",
    ),
    (
        "Cap {name}'s registers (__launch_bounds__ with a minimum of blocks per SM, or fewer live "
        "values per thread) until more warps fit, and check that no spills appear.",
    ),
    weight=0.5,
    limits={"theoretical_pct": 50.0},  # and the kernel is not compute-bound
)

LOW_OCCUPANCY_SHARED = Rule(
    "low-occupancy-shared-memory",
    "low occupancy from shared memory {where}: {theoretical:.0f}% theoretical at {kib:.0f} KiB/block",
    ("low theoretical occupancy", "occupancy limited by shared memory", "large shared memory per block"),
    ("launch__shared_mem_per_block_dynamic", "launch__occupancy_limit_shared_mem", OCCUPANCY_CAP),
    (
        "Shrink {name}'s shared-memory tile or stage count, or opt in to the larger carve-out "
        "(cudaFuncAttributeMaxDynamicSharedMemorySize) so two or more blocks fit per SM.",
    ),
    weight=0.5,
    limits=LOW_OCCUPANCY_REGISTERS.limits,
)

REGISTER_SPILLS = Rule(
    "register-spills",
    "register spills to local memory {where}: local traffic is {ratio:.1%} of the global sectors",
    ("register spills", "local memory traffic", "long scoreboard stalls on local memory"),
    ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"),
    (
        "Remove {name}'s spills: no dynamically indexed per-thread arrays, fewer live values, and no "
        "register cap tighter than the kernel needs (check nvcc -Xptxas -v).",
    ),
    # fires at local sectors >= 1% of global sectors; loss: min(0.5, 2 x that ratio)
    limits={"local_share": 0.01, "scale": 2.0, "cap": 0.5},
)

WARP_DIVERGENCE = Rule(
    "warp-divergence",
    "warp divergence {where}: {threads:.1f} threads active per instruction ({efficiency:.0%} of the warp)",
    (
        "warp divergence",
        "few active threads per instruction",
        "threads of a warp take different paths",
    ),
    (
        "smsp__average_thread_inst_executed_per_inst_executed.ratio",
        "smsp__sass_average_branch_targets_threads_uniform.pct",
    ),
    (
        "Make {name}'s branches uniform per warp (select with arithmetic, or order the work so a "
        "warp takes one path).",
    ),
    weight=0.5,
    limits={"simt_efficiency": 0.8, "branch_uniformity_pct": 80.0},
)
WARP_DIVERGENCE_BRANCHES = replace(
    WARP_DIVERGENCE,
    variant="branches",  # records without active threads per instruction
    title="warp divergence {where}: {uniform:.0f}% of branches are uniform across the warp",
)

MEMORY_BOUND = Rule(
    "memory-bound",
    "{name} is memory-bound at {memory:.0f}% of peak memory throughput ({kernel_share:.0%} of kernel time)",
    ("memory-bound kernel", "DRAM bandwidth near peak", "only fewer bytes help"),
    (DRAM_THROUGHPUT, MEMORY_THROUGHPUT),
    (
        "{name} is at the bandwidth roof: only moving fewer bytes helps (fuse its producer or "
        "consumer into it, read each input once).",
    ),
    weight=0.5,
    limits={"headroom": 0.05},  # the least headroom counted, so a kernel at the roof still ranks
)

COMPUTE_BOUND = Rule(
    "compute-bound",
    "{name} is compute-bound at {sm:.0f}% of SM throughput ({kernel_share:.0%} of kernel time)",
    ("compute-bound kernel", "FMA pipe busy", "instruction issue limited"),
    (SM_THROUGHPUT, FMA_PIPE),
    ("Cut {name}'s instruction count (fewer index computations, fused multiply-adds, register blocking).",),
    weight=0.5,
    limits=MEMORY_BOUND.limits,
)
COMPUTE_BOUND_LIBRARY = replace(
    COMPUTE_BOUND,
    variant="library",
    advice=(
        "{name} is a library kernel near its compute roof: gains come from a cheaper formulation "
        "(fewer FLOPs, tensor cores where the tolerance allows, its epilogue fused), not from its code.",
    ),
)

# Latency-bound: one row per top stall reason (its label, symptoms and advice); the base row is
# the wording when no known stall dominates.
LATENCY_BOUND = Rule(
    "latency-bound",
    "{name} is latency-bound: {label} {where}",
    ("latency-bound kernel", "low throughput on both memory and compute", "small grid"),
    (SM_THROUGHPUT, MEMORY_THROUGHPUT),
    ("Give the GPU more independent work: more blocks or more work per thread, and fewer dependent steps.",),
    weight=0.6,
    label="too little parallelism to hide latency",
)


def _stall(reason: str, label: str, symptoms: tuple[str, ...], advice: str) -> Rule:
    return replace(LATENCY_BOUND, variant=reason, label=label, symptoms=symptoms, advice=(advice,))


STALLS = (
    _stall(
        "long_scoreboard",
        "memory latency not hidden (long_scoreboard stalls)",
        (
            "stall_long_scoreboard dominant",
            "warps waiting on global memory loads",
            "high memory latency not hidden",
        ),
        "Put more bytes in flight per thread: vector (128-bit) loads, several independent loads before "
        "first use, or a cp.async/TMA prefetch of the next tile.",
    ),
    _stall(
        "barrier",
        "warps wait at barriers (barrier stalls)",
        ("stall_barrier dominant", "__syncthreads waits", "unbalanced work between warps"),
        "Cut __syncthreads per tile (double buffering), balance work across warps, use warp shuffles for "
        "the last steps of reductions.",
    ),
    _stall(
        "short_scoreboard",
        "warps wait on shared memory or special functions (short_scoreboard stalls)",
        ("stall_short_scoreboard dominant", "shared memory latency", "MIO pressure"),
        "Reduce shared-memory round trips (keep values in registers, avoid bank conflicts) and "
        "special-function calls.",
    ),
    _stall(
        "mio_throttle",
        "the MIO queue is full (mio_throttle stalls)",
        ("stall_mio_throttle dominant", "shared memory instruction pressure", "bank conflicts"),
        "Issue fewer, wider shared-memory accesses and remove bank conflicts (padding or swizzling).",
    ),
    _stall(
        "lg_throttle",
        "the load/store queue is full (lg_throttle stalls)",
        ("stall_lg_throttle dominant", "too many small global memory instructions"),
        "Use vectorised 128-bit global loads and stores so fewer memory instructions carry the same bytes.",
    ),
    _stall(
        "math_pipe_throttle",
        "an arithmetic pipe is saturated (math_pipe_throttle stalls)",
        ("stall_math_pipe_throttle dominant", "compute-bound pipe saturation"),
        "Cut instructions on the busy pipe: cheaper math (fused multiply-add, fewer divisions), or move "
        "the GEMM part to a better pipe.",
    ),
    _stall(
        "wait",
        "fixed-latency dependencies (wait stalls)",
        ("stall_wait dominant", "dependent arithmetic chains"),
        "Expose independent instructions (unroll, several accumulators) so dependent chains overlap.",
    ),
)

# Less than one wave: added to a latency-bound finding (symptoms, metric, and advice that comes first).
SMALL_GRID = Rule(
    "small-grid",  # an addendum, never a finding of its own
    "",
    ("small grid", "fewer blocks than SMs"),
    ("launch__waves_per_multiprocessor",),
    (
        "{name} launches {waves:.2f} waves: use more, smaller blocks (or split the rows or K) to fill every SM.",
    ),
    limits={"waves": 1.0},
)
_LIBRARY_GRID = "{name} is a library kernel given {waves:.2f} waves of work per call: "
SMALL_GRID_LIBRARY_GEMM = replace(
    SMALL_GRID,
    variant="library-gemm",
    advice=(
        _LIBRARY_GRID + "batch the calls into one larger or strided-batched GEMM (e.g. every time step's "
        "input projection at once), or fuse the small ops around it.",
    ),
)
SMALL_GRID_LIBRARY = replace(
    SMALL_GRID,
    variant="library",
    advice=(
        _LIBRARY_GRID
        + "fuse it with its neighbours into one kernel of ours, or make one call over the whole input.",
    ),
)

CATALOGUE: dict[str, Rule] = {
    rule.key: rule
    for rule in (
        LAUNCH_BOUND,
        replace(
            LAUNCH_BOUND,
            variant="graphed",
            advice=(
                "The forward is already replayed from a CUDA graph, so the idle time is between the graph's "
                "own {kernels:g} kernels: fuse neighbouring kernels or use one persistent kernel for the loop.",
            ),
        ),
        HOST_BOUND,
        HOST_SYNC,
        HOST_TRANSFERS,
        REDUNDANT_PASSES,
        NO_TENSOR_CORES,
        NO_TENSOR_CORES_FP32,
        SOL_GAP,
        SOL_GAP_COMPUTE,
        NO_GPU,
        UNCOALESCED,
        BANK_CONFLICTS,
        LOW_OCCUPANCY_REGISTERS,
        LOW_OCCUPANCY_SHARED,
        REGISTER_SPILLS,
        WARP_DIVERGENCE,
        WARP_DIVERGENCE_BRANCHES,
        MEMORY_BOUND,
        COMPUTE_BOUND,
        COMPUTE_BOUND_LIBRARY,
        LATENCY_BOUND,
        *STALLS,
        SMALL_GRID,
        SMALL_GRID_LIBRARY_GEMM,
        SMALL_GRID_LIBRARY,
    )
}
"""Every row by key (`finding` or `finding/variant`): what reports and the guidance tests can list."""


def rule(finding: str, variant: str = "") -> Rule:
    """The row for a finding (and variant); an unknown variant falls back to the finding's base row."""
    return CATALOGUE.get(f"{finding}/{variant}") or CATALOGUE[finding]
