"""Diagnosis: rules over a candidate's profile -> the main bottleneck, its evidence, ranked cited advice.

Why rules first: the profile already says what is wrong in numbers a rule can read (a GPU idle 60%
of the forward, 32 sectors per global load request, 24% theoretical occupancy capped by registers).
A rule turns such numbers into a named finding with an estimate of the forward's time at stake
(`impact`, 0..1), so findings rank across kinds: program-level ones (launch-bound, host syncs,
transfers, redundant passes over memory) and kernel-level ones weighted by the kernel's share of the
forward (uncoalesced access, bank conflicts, low occupancy from registers or shared memory, spills,
divergence, small grids, unhidden memory latency, GEMMs off the tensor cores). Speed of light
(tools.roofline) gives the program's % of SOL and each kernel's class (memory-, compute- or
latency-bound).

Each of the top findings is turned into a retrieval query made of its name, symptoms and metric names
(never code) against the guidance store (rag_corpus.store.retrieve); the notes that come back are
cited by id on the suggestions they support and listed in Feedback.sources. The result is
graph.artifacts.Feedback(kind="optimize"). Inputs are plain data (tool summaries, artifacts), so
every rule is tested on the CPU from captured profiles.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from graph.artifacts import Feedback, Plan, Profile, TestResult
from tools.profilers.ncu import KernelMetrics, NcuResult, kernel_groups
from tools.profilers.system_profile import format_summary
from tools.roofline import Ceilings, SpeedOfLight, classify_kernel, speed_of_light

GEMM_OPS = frozenset(
    {
        "linear",
        "matmul",
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "einsum",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose2d",
    }
)
TOP_FINDINGS_CITED = 3
NOTES_PER_FINDING = 2
MAX_SUGGESTIONS = 8
NOTE_CHARS = 1500
MIN_KERNEL_SHARE = 0.02  # kernels below this share of the profiled kernel time get no kernel rules

Retriever = Callable[[str, int], Sequence[Any]]  # (query, k) -> hits with .id, .title, .text


@dataclass
class Evidence:
    """What the profile node gathered about one candidate (any part may be missing)."""

    profile: Profile | None = None  # the worker's torch-profiler summary
    system: dict[str, Any] | None = None  # tools.profilers.system_profile summary (nsys or torch profiler)
    ncu: NcuResult | None = None
    reference_system: dict[str, Any] | None = None
    device: str = ""  # the worker's device: a GPU name, or "cpu"

    @property
    def on_gpu(self) -> bool:
        return bool(self.device) and self.device != "cpu"

    @property
    def system_ok(self) -> bool:
        return bool(self.system) and self.system.get("status") == "ok"


@dataclass
class Finding:
    """One named problem with the numbers that show it and what to do about it."""

    rule: str
    title: str
    impact: float  # estimated fraction of the forward's time at stake, 0..1
    evidence: dict[str, Any] = field(default_factory=dict)
    symptoms: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    kernel: str = ""

    def query(self) -> str:
        """The retrieval query: bottleneck name, symptoms and metric names (no code, no kernel names)."""
        parts = [self.rule.replace("-", " ")]
        if self.symptoms:
            parts.append("Symptoms: " + "; ".join(self.symptoms))
        if self.metrics:
            parts.append("Metrics: " + ", ".join(self.metrics))
        return ". ".join(parts)

    def evidence_text(self) -> str:
        return ", ".join(f"{k}={_fmt(v)}" for k, v in self.evidence.items())

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "title": self.title,
            "impact": round(self.impact, 4),
            "evidence": self.evidence,
            "symptoms": self.symptoms,
            "metrics": self.metrics,
            "advice": self.advice,
            "kernel": self.kernel,
        }


@dataclass
class Diagnosis:
    """Ranked findings plus the context every report shows (SOL, kernel classes, tool notes)."""

    findings: list[Finding]
    sol: SpeedOfLight | None = None
    measured_ms: float | None = None
    kernels: list[dict[str, Any]] = field(default_factory=list)
    system_line: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def top(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    @property
    def pct_of_sol(self) -> float | None:
        return self.sol.pct_of_sol(self.measured_ms) if self.sol else None

    def summary(self) -> str:
        """One line: the main bottleneck and where the program stands against SOL."""
        pct = self.pct_of_sol
        stand = f"{pct_text(pct)} of SOL" if pct is not None else "SOL unknown"
        top = self.top
        if top is None:
            return f"no bottleneck found in the profile ({stand})"
        return f"{top.title} (~{top.impact:.0%} of the forward at stake; {stand})"

    def text(self) -> str:
        """The diagnosis as the verifier and the coder read it: evidence first, then the rest ranked."""
        lines = []
        top = self.top
        if top is not None:
            lines.append(f"Bottleneck: {top.title} [rule {top.rule}, impact ~{top.impact:.0%}]")
            if top.evidence:
                lines.append(f"  evidence: {top.evidence_text()}")
        if self.sol is not None:
            lines.append("Speed of light: " + self.sol.describe(self.measured_ms))
        if self.system_line:
            lines.append("System: " + self.system_line)
        if self.kernels:
            lines.append("Kernels (ncu, share of profiled kernel time):")
            for k in self.kernels[:6]:
                lines.append("  " + _kernel_line(k))
        others = self.findings[1:6]
        if others:
            lines.append("Other findings, ranked:")
            for f in others:
                lines.append(
                    f"  - {f.title} [rule {f.rule}, ~{f.impact:.0%}]"
                    + (f": {f.evidence_text()}" if f.evidence else "")
                )
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            "findings": [f.to_dict() for f in self.findings],
            "speed_of_light": self.sol.to_dict(self.measured_ms) if self.sol else None,
            "kernels": self.kernels,
            "system": self.system_line,
            "notes": self.notes,
        }


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _kernel_line(k: dict[str, Any]) -> str:
    parts = [f"{k['base_name']}: {k['share']:.0%} x{k['calls']}, {k['duration_us']:.4g} us, {k['class']}"]
    for key, label in (
        ("sm_pct", "SM"),
        ("memory_pct", "mem"),
        ("dram_pct", "DRAM"),
    ):
        if k.get(key) is not None:
            parts.append(f"{label} {k[key]:.0f}%")
    if k.get("achieved_occupancy_pct") is not None and k.get("theoretical_occupancy_pct") is not None:
        parts.append(f"occupancy {k['achieved_occupancy_pct']:.0f}/{k['theoretical_occupancy_pct']:.0f}%")
    if k.get("registers") is not None:
        parts.append(f"{k['registers']:.0f} regs")
    if k.get("top_stall"):
        parts.append(f"top stall {k['top_stall']}")
    return ", ".join(parts)


# ----------------------------------------------------------------------------------------------
# Rules
# ----------------------------------------------------------------------------------------------


@dataclass
class _Facts:
    """Numbers several rules need, computed once."""

    evidence: Evidence
    plan: Plan | None
    test: TestResult | None
    sol: SpeedOfLight | None
    wall_ms: float | None  # one forward, as timed (or as profiled)
    busy_fraction: float  # device time / wall time, 0..1
    groups: list[dict[str, Any]]  # ncu kernel groups with class
    precision: str


def _wall_ms(evidence: Evidence, test: TestResult | None) -> float | None:
    """One forward's time: the verifier's timing, else the timeline's wall time, else device time."""
    if test is not None and test.candidate_ms:
        return test.candidate_ms
    if evidence.system_ok:
        return evidence.system.get("wall_ms")  # type: ignore[union-attr]
    if evidence.profile is not None:
        return evidence.profile.device_ms
    ncu = evidence.ncu
    if ncu is not None and ncu.ok and not ncu.truncated:
        return sum(k.duration_ns or 0.0 for k in ncu.kernels) / 1e6 or None
    return None


def pct_text(pct: float | None) -> str:
    """'93%' or '0.11%': two significant digits below 10%."""
    if pct is None:
        return "SOL unknown"
    return f"{pct:.0f}%" if pct >= 10 else f"{pct:.2g}%"


def _device_ms(evidence: Evidence) -> float | None:
    if evidence.system_ok:
        return evidence.system.get("device_ms")  # type: ignore[union-attr]
    return evidence.profile.device_ms if evidence.profile else None


def _launch_bound(facts: _Facts) -> list[Finding]:
    ev = facts.evidence
    if not ev.on_gpu:
        return []
    if ev.system_ok:
        system = ev.system or {}
        idle = 1.0 - float(system.get("gpu_busy_pct", 100.0)) / 100.0
        kernels = float(system.get("kernel_count", 0.0))
        gaps = system.get("launch_gaps", {})
        graphs = float(system.get("graph_launches", 0.0))
        evidence = {
            "gpu_busy_pct": system.get("gpu_busy_pct"),
            "kernels_per_forward": kernels,
            "launch_gaps_ms": gaps.get("total_ms"),
            "max_gap_us": gaps.get("max_us"),
            "wall_ms": system.get("wall_ms"),
        }
    elif ev.profile is not None and facts.wall_ms:
        device_ms = ev.profile.device_ms
        idle = max(0.0, 1.0 - device_ms / facts.wall_ms)
        kernels = float(ev.profile.kernel_count)
        graphs = 0.0
        evidence = {"device_ms": device_ms, "timed_ms": facts.wall_ms, "kernels_per_forward": kernels}
    else:
        return []
    mean_us = facts.wall_ms * 1e3 * (1 - idle) / kernels if kernels and facts.wall_ms else None
    if idle < 0.25 or (kernels < 3 and (mean_us is None or mean_us > 20)):
        return []
    advice = []
    if graphs > 0:
        advice.append(
            "The forward is already replayed from a CUDA graph, so the idle time is between the graph's own "
            f"{kernels:g} kernels: fuse neighbouring kernels or use one persistent kernel for the loop."
        )
    else:
        advice.append(
            "Capture the whole forward into one CUDA graph and replay it (static input and output buffers, "
            "copy inputs in, clone the output): one launch instead of "
            f"{kernels:g}."
        )
        advice.append(
            f"Fuse the {kernels:g} short kernels into fewer, longer ones so each launch does more work."
        )
    return [
        Finding(
            rule="launch-bound",
            title=f"launch-bound: the GPU is idle {idle:.0%} of the forward around {kernels:g} kernel launches",
            impact=0.9 * idle,
            evidence=evidence,
            symptoms=[
                "GPU idle between kernels",
                "many short kernels",
                "launch overhead dominates",
                "low GPU busy",
            ],
            metrics=["gpu busy %", "launch gaps", "kernels per forward", "mean kernel duration"],
            advice=advice,
        )
    ]


def _host_syncs(facts: _Facts) -> list[Finding]:
    system = facts.evidence.system if facts.evidence.system_ok else None
    if not system:
        return []
    syncs = system.get("host_syncs", {})
    count = float(syncs.get("count", 0.0))
    copies = system.get("copies", {})
    dtoh = float(copies.get("DtoH", {}).get("count", 0.0))
    if count < 1 and dtoh < 1:
        return []
    idle = 1.0 - float(system.get("gpu_busy_pct", 100.0)) / 100.0
    calls = ", ".join(f"{k} x{v:g}" for k, v in syncs.get("calls", {}).items())
    return [
        Finding(
            rule="host-sync",
            title=f"host synchronisation inside the forward: {count:g} sync(s) and {dtoh:g} device-to-host copies per forward",
            impact=min(0.9, max(0.1, idle)),
            evidence={
                "syncs_per_forward": count,
                "calls": calls,
                "dtoh_copies": dtoh,
                "gpu_busy_pct": system.get("gpu_busy_pct"),
            },
            symptoms=[
                "host synchronization inside forward",
                "cudaStreamSynchronize or .item() or .cpu() calls",
                "GPU idle while the host waits",
                "device to host copy",
            ],
            metrics=["cudaStreamSynchronize calls", "cudaDeviceSynchronize calls", "DtoH memcpy count"],
            advice=[
                "Remove every host round trip from forward: no .item(), .cpu(), .tolist(), print of a tensor or "
                "torch.cuda.synchronize(); keep scalars on the device and let the stream order the work.",
            ],
        )
    ]


def _transfers(facts: _Facts) -> list[Finding]:
    system = facts.evidence.system if facts.evidence.system_ok else None
    if not system or not facts.wall_ms:
        return []
    copies = system.get("copies", {})
    moved = {k: v for k, v in copies.items() if k in ("HtoD", "DtoH", "HtoH") and v.get("bytes", 0) > 0}
    if not moved:
        return []
    ms = sum(float(v.get("ms", 0.0)) for v in moved.values())
    nbytes = sum(float(v.get("bytes", 0.0)) for v in moved.values())
    return [
        Finding(
            rule="host-transfers",
            title=f"host<->device copies inside the forward: {nbytes / 1e6:.3g} MB in {ms:.3g} ms per forward",
            impact=min(0.9, max(0.05, ms / facts.wall_ms)),
            evidence={k: f"{v['count']:g}x {v['bytes'] / 1e6:.3g} MB" for k, v in moved.items()},
            symptoms=[
                "host to device copies in forward",
                "PCIe transfers",
                "pageable memcpy",
                "tensor created on the CPU",
            ],
            metrics=["memcpy HtoD bytes", "memcpy DtoH bytes", "cuda_gpu_mem_size_sum"],
            advice=[
                "Create constants and scratch tensors on the GPU once (in __init__ or cached), never per forward; "
                "if a copy is unavoidable, use pinned memory and non_blocking=True."
            ],
        )
    ]


def _redundant_passes(facts: _Facts) -> list[Finding]:
    plan, ncu = facts.plan, facts.evidence.ncu
    if plan is None or not plan.total_bytes or facts.sol is None:
        return []
    memory_share = sum(g["share"] for g in facts.groups if g["class"] == "memory-bound")
    if ncu is not None and ncu.ok and not ncu.truncated:
        measured = sum(k.dram_bytes or 0.0 for k in ncu.kernels)
        if not measured:
            return []
        ratio = measured / plan.total_bytes
        if ratio < 1.5 or (memory_share < 0.3 and facts.sol.bound != "memory"):
            return []
        weight = max(memory_share, 0.5 if facts.sol.bound == "memory" else 0.0)
        return [
            Finding(
                rule="redundant-passes",
                title=f"redundant passes over memory: the kernels move {ratio:.1f}x the minimum bytes",
                impact=(1.0 - 1.0 / ratio) * weight * facts.busy_fraction,
                evidence={
                    "dram_bytes": measured,
                    "minimum_bytes": plan.total_bytes,
                    "ratio": round(ratio, 2),
                    "kernels": len(ncu.kernels),
                },
                symptoms=[
                    "redundant passes over memory",
                    "intermediate tensors written and read back",
                    "DRAM bytes exceed the minimum",
                ],
                metrics=["dram__bytes_read.sum", "dram__bytes_write.sum", "minimum bytes"],
                advice=[
                    "Fuse the kernels that read and write the same data into one pass (keep intermediates in "
                    "registers or shared memory); the minimum traffic is "
                    f"{plan.total_bytes / 1e6:.4g} MB per forward."
                ],
            )
        ]
    return []


def _tensor_cores(facts: _Facts) -> list[Finding]:
    plan, sol = facts.plan, facts.sol
    if (
        plan is None
        or sol is None
        or not plan.total_flops
        or sol.bound != "compute"
        or not facts.evidence.on_gpu
    ):
        return []
    gemm_flops = sum(o.flops for o in plan.ops if o.op in GEMM_OPS)
    share = gemm_flops / plan.total_flops
    if share < 0.5:
        return []
    compute = [g for g in facts.groups if g["class"] == "compute-bound"] or facts.groups[:1]
    tensor = [g["exemplar"].tensor_pipe_pct for g in compute if g["exemplar"].tensor_pipe_pct is not None]
    if tensor and max(tensor) >= 5.0:
        return []
    time_share = sum(g["share"] for g in compute) * facts.busy_fraction if compute else facts.busy_fraction
    fma = [g["exemplar"].fma_pipe_pct for g in compute if g["exemplar"].fma_pipe_pct is not None]
    evidence: dict[str, Any] = {"gemm_flop_share": round(share, 3), "precision": facts.precision}
    if tensor:
        evidence["tensor_pipe_pct"] = max(tensor)
    if fma:
        evidence["fma_pipe_pct"] = max(fma)
    if facts.precision == "fp32":
        title = "GEMM-heavy problem on the FP32 pipes: tensor cores need TF32/BF16, which the fp32 tolerance excludes"
        impact = 0.15 * time_share
        advice = [
            "Keep plain fp32 (TF32 alone fails 1e-4): make the GEMM reach the SGEMM ceiling (cuBLASLt with "
            "an epilogue, tiles in shared memory, register blocking); a split-precision 3xTF32 product can use "
            "the tensor cores at near-fp32 accuracy, but check it against the tolerance."
        ]
    else:
        title = f"GEMM-heavy problem not using the tensor cores although {facts.precision} allows them"
        impact = 0.7 * time_share
        advice = [
            f"Run the GEMMs on the tensor cores in {facts.precision} (cuBLASLt compute type, WMMA/wgmma)."
        ]
    return [
        Finding(
            rule="no-tensor-cores",
            title=title,
            impact=impact,
            evidence=evidence,
            symptoms=[
                "GEMM on FP32 pipes",
                "no tensor core usage",
                "tensor pipe idle",
                "compute-bound matmul",
            ],
            metrics=[TENSOR_METRIC, "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"],
            advice=advice,
        )
    ]


TENSOR_METRIC = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"

_STALL_ADVICE = {
    "long_scoreboard": (
        "memory latency not hidden (long_scoreboard stalls)",
        [
            "stall_long_scoreboard dominant",
            "warps waiting on global memory loads",
            "high memory latency not hidden",
        ],
        "Put more bytes in flight per thread: vector (128-bit) loads, several independent loads before first use, "
        "or a cp.async/TMA prefetch of the next tile.",
    ),
    "barrier": (
        "warps wait at barriers (barrier stalls)",
        ["stall_barrier dominant", "__syncthreads waits", "unbalanced work between warps"],
        "Cut __syncthreads per tile (double buffering), balance work across warps, use warp shuffles for the last steps of reductions.",
    ),
    "short_scoreboard": (
        "warps wait on shared memory or special functions (short_scoreboard stalls)",
        ["stall_short_scoreboard dominant", "shared memory latency", "MIO pressure"],
        "Reduce shared-memory round trips (keep values in registers, avoid bank conflicts) and special-function calls.",
    ),
    "mio_throttle": (
        "the MIO queue is full (mio_throttle stalls)",
        ["stall_mio_throttle dominant", "shared memory instruction pressure", "bank conflicts"],
        "Issue fewer, wider shared-memory accesses and remove bank conflicts (padding or swizzling).",
    ),
    "lg_throttle": (
        "the load/store queue is full (lg_throttle stalls)",
        ["stall_lg_throttle dominant", "too many small global memory instructions"],
        "Use vectorised 128-bit global loads and stores so fewer memory instructions carry the same bytes.",
    ),
    "math_pipe_throttle": (
        "an arithmetic pipe is saturated (math_pipe_throttle stalls)",
        ["stall_math_pipe_throttle dominant", "compute-bound pipe saturation"],
        "Cut instructions on the busy pipe: cheaper math (fused multiply-add, fewer divisions), or move the GEMM part to a better pipe.",
    ),
    "wait": (
        "fixed-latency dependencies (wait stalls)",
        ["stall_wait dominant", "dependent arithmetic chains"],
        "Expose independent instructions (unroll, several accumulators) so dependent chains overlap.",
    ),
}


# Kernels whose code is a library's (cuBLAS, CUTLASS, cuDNN, PyTorch's own, CUB): advice to edit
# their code is useless; what helps is changing how they are called (batch, fuse, reformulate).
_LIBRARY_KERNEL = re.compile(
    r"cublas|cutlass|xmma|cudnn|nvjet|splitKreduce|\bgemv|\bat::|\bc10::|\bcub::|"
    r"\b(sm\d{2,3}|ampere|hopper|volta|turing)_[a-z0-9]*gemm",
    re.IGNORECASE,
)

_GEMM_KERNEL = re.compile(r"gemm|\bgemv|splitK|cutlass|xmma|nvjet", re.IGNORECASE)


def is_library_kernel(name: str) -> bool:
    """True for a kernel a library ships (matched on the full demangled name); ours start with stitch_.

    Narrower than tools.worker.dynamic_checks' library/torch classifier on purpose: that one only sees
    kernels already known not to be the program's, while ncu records carry no such list, so this one
    matches vendor namespaces and name prefixes only (an LLM's own `gemm_tiled` is not cuBLAS).
    """
    return not name.startswith(("stitch_", "void stitch_")) and bool(_LIBRARY_KERNEL.search(name))


@dataclass
class _Kernel:
    """One kernel group as the kernel rules see it."""

    k: KernelMetrics
    name: str
    cls: str
    kernel_share: float  # of the profiled kernel time
    share: float  # of the forward (kernel share x busy fraction)
    library: bool = False  # a library's kernel: only how it is called can change

    @property
    def where(self) -> str:
        return f"in {self.name} ({self.kernel_share:.0%} of kernel time)"


def _kernel_rules(facts: _Facts) -> list[Finding]:
    findings: list[Finding] = []
    for group in facts.groups:
        if group["share"] < MIN_KERNEL_SHARE:
            continue
        k: KernelMetrics = group["exemplar"]
        kernel = _Kernel(
            k,
            k.base_name or k.name,
            group["class"],
            group["share"],
            group["share"] * facts.busy_fraction,
            library=is_library_kernel(k.name),
        )
        # A library kernel's registers, shared memory, branches and spills are its authors' choices;
        # its access pattern and boundedness still follow from the shapes and layouts it is given.
        code_rules = () if kernel.library else (_bank_conflicts, _occupancy, _spills, _divergence)
        for rule in (_coalescing, *code_rules, _class_finding):
            findings += rule(kernel)
    return findings


_COALESCING = (
    ("load", "ld"),
    ("store", "st"),
)


def _coalescing(kernel: _Kernel) -> list[Finding]:
    k = kernel.k
    candidates = []
    for kind, op in _COALESCING:
        pct = getattr(k, f"global_{kind}_bytes_per_sector_pct")
        spr = getattr(k, f"global_{kind}_sectors_per_request")
        # 0% is no evidence: the SASS-patched byte count misses cp.async (LDGSTS) loads, so a cuBLAS
        # GEMM reads 0% used bytes at 4 sectors per request (perfectly coalesced) on the H200.
        if pct:
            efficiency = pct / 100.0
        elif spr is not None and spr > 16.5:  # a fully coalesced 128-bit warp access is 16 sectors
            efficiency = 16.0 / spr
        else:
            continue
        if efficiency < 0.6:
            candidates.append((efficiency, kind, op, pct, spr))
    if not candidates:
        return []
    efficiency, kind, op, pct, spr = min(candidates)
    evidence: dict[str, Any] = {}
    if pct is not None:
        evidence[f"global_{kind}_bytes_used_per_sector_pct"] = pct
    if spr is not None:
        evidence[f"global_{kind}_sectors_per_request"] = round(spr, 2)
    return [
        Finding(
            rule="uncoalesced-access",
            title=f"uncoalesced global {kind}s {kernel.where}: {efficiency:.0%} of each fetched sector is used",
            impact=kernel.share * (1.0 - efficiency) * 0.8,
            evidence=evidence,
            symptoms=[
                "uncoalesced global memory access",
                "many sectors per request",
                "low bytes used per sector",
                "strided access",
            ],
            metrics=[
                f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum",
                f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum",
                f"smsp__sass_average_data_bytes_per_sector_mem_global_op_{op}.pct",
            ],
            advice=[
                f"Make consecutive threads of a warp touch consecutive addresses in {kernel.name}'s global {kind}s "
                "(thread index on the fastest-moving dimension); stage transposes or strided gathers through "
                "shared memory so both the global read and write are coalesced."
            ],
            kernel=kernel.name,
        )
    ]


def _bank_conflicts(kernel: _Kernel) -> list[Finding]:
    k = kernel.k
    ratio = k.bank_conflict_ratio  # share of shared-memory wavefronts that are conflict replays
    wavefronts = (k.shared_load_wavefronts or 0.0) + (k.shared_store_wavefronts or 0.0)
    if ratio is None or ratio < 0.2 or wavefronts < 1000:
        return []
    return [
        Finding(
            rule="bank-conflicts",
            title=f"shared-memory bank conflicts {kernel.where}: {ratio:.0%} of shared wavefronts are conflict replays",
            impact=kernel.share * ratio * 0.8,
            evidence={
                "bank_conflicts": (k.shared_load_bank_conflicts or 0.0)
                + (k.shared_store_bank_conflicts or 0.0),
                "shared_wavefronts": wavefronts,
                "conflict_share": round(ratio, 3),
            },
            symptoms=[
                "shared memory bank conflicts",
                "many wavefronts per shared load",
                "mio throttle stalls",
            ],
            metrics=[
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
            ],
            advice=[
                f"Pad {kernel.name}'s shared-memory tile by one element per row (or swizzle the column index) so a "
                "warp's column accesses fall in 32 different banks."
            ],
            kernel=kernel.name,
        )
    ]


def _occupancy(kernel: _Kernel) -> list[Finding]:
    k = kernel.k
    theoretical, limiter = k.theoretical_occupancy_pct, k.occupancy_limiter
    if theoretical is None or theoretical >= 50.0 or limiter not in ("registers", "shared_mem"):
        return []
    if kernel.cls == "compute-bound":
        return []
    impact = kernel.share * (1.0 - theoretical / 100.0) * 0.5
    if limiter == "registers":
        return [
            Finding(
                rule="low-occupancy-registers",
                title=(
                    f"low occupancy from register pressure {kernel.where}: {theoretical:.0f}% theoretical at "
                    f"{k.registers_per_thread or 0:.0f} registers/thread"
                ),
                impact=impact,
                evidence={
                    "registers_per_thread": k.registers_per_thread,
                    "theoretical_occupancy_pct": theoretical,
                    "achieved_occupancy_pct": k.achieved_occupancy_pct,
                    "block_limit_registers": k.limit_registers,
                },
                symptoms=[
                    "low theoretical occupancy",
                    "occupancy limited by registers",
                    "high registers per thread",
                ],
                metrics=[
                    "launch__registers_per_thread",
                    "launch__occupancy_limit_registers",
                    "sm__maximum_warps_per_active_cycle_pct",
                    "sm__warps_active.avg.pct_of_peak_sustained_active",
                ],
                advice=[
                    f"Cap {kernel.name}'s registers (__launch_bounds__ with a minimum of blocks per SM, or fewer live "
                    "values per thread) until more warps fit, and check that no spills appear."
                ],
                kernel=kernel.name,
            )
        ]
    return [
        Finding(
            rule="low-occupancy-shared-memory",
            title=(
                f"low occupancy from shared memory {kernel.where}: {theoretical:.0f}% theoretical at "
                f"{(k.shared_mem_per_block or 0) / 1024:.0f} KiB/block"
            ),
            impact=impact,
            evidence={
                "shared_mem_per_block": k.shared_mem_per_block,
                "theoretical_occupancy_pct": theoretical,
                "achieved_occupancy_pct": k.achieved_occupancy_pct,
                "block_limit_shared_mem": k.limit_shared_mem,
            },
            symptoms=[
                "low theoretical occupancy",
                "occupancy limited by shared memory",
                "large shared memory per block",
            ],
            metrics=[
                "launch__shared_mem_per_block_dynamic",
                "launch__occupancy_limit_shared_mem",
                "sm__maximum_warps_per_active_cycle_pct",
            ],
            advice=[
                f"Shrink {kernel.name}'s shared-memory tile or stage count, or opt in to the larger carve-out "
                "(cudaFuncAttributeMaxDynamicSharedMemorySize) so two or more blocks fit per SM."
            ],
            kernel=kernel.name,
        )
    ]


def _spills(kernel: _Kernel) -> list[Finding]:
    k = kernel.k
    local = k.local_sectors
    global_sectors = (k.global_load_sectors or 0.0) + (k.global_store_sectors or 0.0)
    if not local or local < 0.01 * max(global_sectors, 1.0):
        return []
    ratio = local / max(global_sectors, 1.0)
    return [
        Finding(
            rule="register-spills",
            title=f"register spills to local memory {kernel.where}: local traffic is {ratio:.1%} of the global sectors",
            impact=kernel.share * min(0.5, 2.0 * ratio),
            evidence={
                "local_sectors": local,
                "global_sectors": global_sectors,
                "registers_per_thread": k.registers_per_thread,
            },
            symptoms=["register spills", "local memory traffic", "long scoreboard stalls on local memory"],
            metrics=[
                "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
                "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
            ],
            advice=[
                f"Remove {kernel.name}'s spills: no dynamically indexed per-thread arrays, fewer live values, and no "
                "register cap tighter than the kernel needs (check nvcc -Xptxas -v)."
            ],
            kernel=kernel.name,
        )
    ]


def _divergence(kernel: _Kernel) -> list[Finding]:
    """Lanes masked off: active threads per instruction first (what divergence costs), branch uniformity else.

    Branch uniformity alone misleads both ways on real records: a branch-free kernel reads 0%, and a
    kernel whose lanes split once before two long uniform loops reads 99% while half its lanes idle.
    """
    k = kernel.k
    efficiency, uniform = k.simt_efficiency, k.branch_uniformity_evidence
    evidence: dict[str, Any] = {}
    if efficiency is not None:
        if efficiency >= 0.8:
            return []
        lost = 1.0 - efficiency
        title = (
            f"warp divergence {kernel.where}: {k.threads_per_instruction:.1f} threads active per instruction "
            f"({efficiency:.0%} of the warp)"
        )
        evidence.update(
            threads_per_instruction=k.threads_per_instruction, simt_efficiency=round(efficiency, 3)
        )
    elif uniform is not None and uniform < 80.0:
        lost = 1.0 - uniform / 100.0
        title = f"warp divergence {kernel.where}: {uniform:.0f}% of branches are uniform across the warp"
    else:
        return []
    if uniform is not None:
        evidence["branch_uniformity_pct"] = uniform
    if k.branch_instructions is not None:
        evidence["branch_instructions"] = k.branch_instructions
    return [
        Finding(
            rule="warp-divergence",
            title=title,
            impact=kernel.share * lost * 0.5,
            evidence=evidence,
            symptoms=[
                "warp divergence",
                "few active threads per instruction",
                "threads of a warp take different paths",
            ],
            metrics=[
                "smsp__average_thread_inst_executed_per_inst_executed.ratio",
                "smsp__sass_average_branch_targets_threads_uniform.pct",
            ],
            advice=[
                f"Make {kernel.name}'s branches uniform per warp (select with arithmetic, or order the work so a "
                "warp takes one path)."
            ],
            kernel=kernel.name,
        )
    ]


def _small_grid_advice(kernel: _Kernel) -> str:
    """Less than one wave: our kernel should launch more blocks; a library kernel should get more work per call."""
    name, waves = kernel.name, kernel.k.waves_per_sm or 0.0
    if not kernel.library:
        return f"{name} launches {waves:.2f} waves: use more, smaller blocks (or split the rows or K) to fill every SM."
    if _GEMM_KERNEL.search(kernel.k.name):
        remedy = (
            "batch the calls into one larger or strided-batched GEMM (e.g. every time step's input projection "
            "at once), or fuse the small ops around it."
        )
    else:
        remedy = "fuse it with its neighbours into one kernel of ours, or make one call over the whole input."
    return f"{name} is a library kernel given {waves:.2f} waves of work per call: {remedy}"


def _class_finding(kernel: _Kernel) -> list[Finding]:
    """What the kernel's boundedness itself says: at the bandwidth roof, compute-bound, or latency-bound."""
    k, name = kernel.k, kernel.name
    dram = k.dram_throughput_pct
    sm = k.sm_throughput_pct or 0.0
    memory = k.memory_throughput_pct if k.memory_throughput_pct is not None else (dram or 0.0)
    if kernel.cls == "memory-bound":
        return [
            Finding(
                rule="memory-bound",
                title=f"{name} is memory-bound at {memory:.0f}% of peak memory throughput ({kernel.kernel_share:.0%} of kernel time)",
                impact=kernel.share * max(0.05, 1.0 - memory / 100.0) * 0.5,
                evidence={
                    "memory_throughput_pct": memory,
                    "dram_throughput_pct": dram,
                    "sm_throughput_pct": sm,
                },
                symptoms=["memory-bound kernel", "DRAM bandwidth near peak", "only fewer bytes help"],
                metrics=[
                    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                ],
                advice=[
                    f"{name} is at the bandwidth roof: only moving fewer bytes helps (fuse its producer or "
                    "consumer into it, read each input once)."
                ],
                kernel=name,
            )
        ]
    if kernel.cls == "compute-bound":
        return [
            Finding(
                rule="compute-bound",
                title=f"{name} is compute-bound at {sm:.0f}% of SM throughput ({kernel.kernel_share:.0%} of kernel time)",
                impact=kernel.share * max(0.05, 1.0 - sm / 100.0) * 0.5,
                evidence={
                    "sm_throughput_pct": sm,
                    "fma_pipe_pct": k.fma_pipe_pct,
                    "issue_active_pct": k.issue_active_pct,
                },
                symptoms=["compute-bound kernel", "FMA pipe busy", "instruction issue limited"],
                metrics=[
                    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
                ],
                advice=[
                    f"{name} is a library kernel near its compute roof: gains come from a cheaper formulation "
                    "(fewer FLOPs, tensor cores where the tolerance allows, its epilogue fused), not from its code."
                    if kernel.library
                    else f"Cut {name}'s instruction count (fewer index computations, fused multiply-adds, register blocking)."
                ],
                kernel=name,
            )
        ]
    if kernel.cls != "latency-bound":
        return []
    stalls = k.top_stalls(1)
    reason = stalls[0][0] if stalls else ""
    label, symptoms, advice = _STALL_ADVICE.get(
        reason,
        (
            "too little parallelism to hide latency",
            ["latency-bound kernel", "low throughput on both memory and compute", "small grid"],
            "Give the GPU more independent work: more blocks or more work per thread, and fewer dependent steps.",
        ),
    )
    evidence: dict[str, Any] = {
        "sm_throughput_pct": sm,
        "memory_throughput_pct": memory,
        "duration_us": round((k.duration_ns or 0) / 1e3, 3),
    }
    if stalls:
        evidence["top_stall"] = f"{stalls[0][0]} ({stalls[0][2]:.0%} of stalls)"
    metrics = [
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    ]
    if reason:
        metrics.insert(0, f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio")
    extra = []
    if k.waves_per_sm is not None and k.waves_per_sm < 1.0:
        evidence["waves_per_sm"] = k.waves_per_sm
        symptoms = [*symptoms, "small grid", "fewer blocks than SMs"]
        metrics.append("launch__waves_per_multiprocessor")
        extra.append(_small_grid_advice(kernel))
    return [
        Finding(
            rule="latency-bound",
            title=f"{name} is latency-bound: {label} {kernel.where}",
            impact=kernel.share * (1.0 - max(sm, memory) / 100.0) * 0.6,
            evidence=evidence,
            symptoms=list(symptoms),
            metrics=metrics,
            advice=extra if kernel.library else [*extra, advice],  # a library's code is not ours to tune
            kernel=name,
        )
    ]


def _sol_gap(facts: _Facts) -> list[Finding]:
    """Always there when SOL is known: how far the program is from it, as a low-priority finding."""
    sol = facts.sol
    pct = sol.pct_of_sol(facts.wall_ms) if sol is not None else None
    if sol is None or pct is None or not facts.evidence.on_gpu:
        return []
    bound = sol.bound
    symptoms = (
        ["memory-bound kernel below peak bandwidth", "minimum bytes", "roofline"]
        if bound == "memory"
        else ["compute-bound", "FLOP rate below peak", "roofline"]
    )
    return [
        Finding(
            rule="sol-gap",
            title=f"{pct_text(pct)} of speed of light for a {bound}-bound problem",
            impact=0.3 * max(0.0, 1.0 - pct / 100.0),
            evidence={
                "measured_ms": facts.wall_ms,
                "sol_ms": round(sol.sol_ms, 6),
                "pct_of_sol": round(pct, 1),
            },
            symptoms=symptoms,
            metrics=[
                "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                "sm__throughput.avg.pct_of_peak_sustained_elapsed",
            ],
            advice=[
                f"The {bound} ceiling allows {sol.sol_ms:.4g} ms; work on the largest kernel until its "
                f"{'DRAM' if bound == 'memory' else 'SM'} throughput is near peak."
            ],
        )
    ]


def _no_gpu(facts: _Facts) -> list[Finding]:
    if facts.evidence.on_gpu:
        return []
    return [
        Finding(
            rule="no-gpu-profile",
            title="profiled without a GPU: no kernel metrics, timeline or speed of light",
            impact=0.0,
            evidence={"device": facts.evidence.device or "unknown"},
            symptoms=["no GPU profile"],
            metrics=[],
            advice=[
                "Profile on the GPU to get a diagnosis; meanwhile follow the plan's fusion groups and host plan."
            ],
        )
    ]


RULES: tuple[Callable[[_Facts], list[Finding]], ...] = (
    _launch_bound,
    _host_syncs,
    _transfers,
    _redundant_passes,
    _tensor_cores,
    _kernel_rules,
    _sol_gap,
    _no_gpu,
)


def kernel_table(ncu: NcuResult | None) -> list[dict[str, Any]]:
    """Kernel groups with their class and the metrics a report shows (plain data)."""
    if ncu is None or not ncu.ok:
        return []
    rows = []
    for group in kernel_groups(ncu.kernels):
        k: KernelMetrics = group["exemplar"]
        cls, why = classify_kernel(k)
        stalls = k.top_stalls(1)
        rows.append(
            {
                "name": group["name"],
                "base_name": group["base_name"],
                "calls": group["calls"],
                "share": round(group["share"], 4),
                "duration_us": round(group["total_ns"] / 1e3 / max(group["calls"], 1), 3),
                "class": cls,
                "why": why,
                "sm_pct": k.sm_throughput_pct,
                "memory_pct": k.memory_throughput_pct,
                "dram_pct": k.dram_throughput_pct,
                "achieved_occupancy_pct": k.achieved_occupancy_pct,
                "theoretical_occupancy_pct": k.theoretical_occupancy_pct,
                "registers": k.registers_per_thread,
                "top_stall": f"{stalls[0][0]} ({stalls[0][2]:.0%})" if stalls else "",
            }
        )
    return rows


def diagnose(
    evidence: Evidence,
    *,
    plan: Plan | None = None,
    test: TestResult | None = None,
    ceilings: Ceilings | None = None,
    precision: str = "fp32",
) -> Diagnosis:
    """Run every rule over the evidence and rank the findings by the time at stake."""
    sol = None
    if plan is not None and ceilings is not None and (plan.total_flops or plan.total_bytes):
        sol = speed_of_light(plan.total_flops, plan.total_bytes, ceilings, precision)
    wall_ms = _wall_ms(evidence, test)
    device_ms = _device_ms(evidence)
    busy = min(1.0, device_ms / wall_ms) if wall_ms and device_ms else 1.0
    groups = []
    if evidence.ncu is not None and evidence.ncu.ok:
        for group in kernel_groups(evidence.ncu.kernels):
            group["class"] = classify_kernel(group["exemplar"])[0]
            groups.append(group)
    facts = _Facts(evidence, plan, test, sol, wall_ms, busy, groups, precision)
    findings = [f for rule in RULES for f in rule(facts)]
    findings.sort(key=lambda f: -f.impact)
    notes = []
    if evidence.on_gpu and evidence.ncu is not None and not evidence.ncu.ok:
        notes.append(f"ncu: {evidence.ncu.status}: {evidence.ncu.reason}")
    if evidence.ncu is not None and evidence.ncu.truncated:
        notes.append(f"ncu profiled only the first {evidence.ncu.launch_count} launches of the forward")
    if evidence.system is not None and evidence.system.get("status") != "ok":
        notes.append(f"system profile: {evidence.system.get('status')}: {evidence.system.get('reason', '')}")
    if evidence.system is not None and evidence.system.get("fallback_reason"):
        notes.append(f"system profile from the PyTorch profiler ({evidence.system['fallback_reason']})")
    if sol is not None and sol.ceilings_source.startswith("assumed"):
        notes.append(f"ceilings {sol.ceilings_source}")
    system_line = format_summary(evidence.system) if evidence.system_ok else ""
    return Diagnosis(findings, sol, wall_ms, kernel_table(evidence.ncu), system_line, notes)


# ----------------------------------------------------------------------------------------------
# Guidance and Feedback
# ----------------------------------------------------------------------------------------------


def default_retriever(query: str, k: int) -> Sequence[Any]:
    """The guidance store (imported on first use: chromadb is heavy and optional for the tools)."""
    from rag_corpus.store import retrieve

    return retrieve(query, k=k)


@dataclass
class Guidance:
    """What retrieval returned for the top findings: note ids per finding and the notes' text."""

    cited: dict[int, list[str]] = field(default_factory=dict)  # finding index -> note ids
    notes: list[str] = field(default_factory=list)  # "[id] title\ntext" for the verifier prompt
    sources: list[str] = field(default_factory=list)
    error: str = ""


def retrieve_guidance(
    diagnosis: Diagnosis, retriever: Retriever | None = None, k: int = NOTES_PER_FINDING
) -> Guidance:
    """Query the store once per top finding with its diagnosis text; failures leave the advice uncited."""
    retriever = retriever or default_retriever
    guidance = Guidance()
    seen: set[str] = set()
    for index, finding in enumerate(diagnosis.findings[:TOP_FINDINGS_CITED]):
        if not finding.symptoms:
            continue
        try:
            hits = list(retriever(finding.query(), k))
        except Exception as exc:  # a missing or broken store must not cost the diagnosis
            guidance.error = f"guidance store unavailable: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            break
        ids = []
        for hit in hits:
            ids.append(hit.id)
            if hit.id not in seen:
                seen.add(hit.id)
                guidance.sources.append(hit.id)
                text = hit.text if len(hit.text) <= NOTE_CHARS else hit.text[: NOTE_CHARS - 3] + "..."
                guidance.notes.append(f"[{hit.id}] {hit.title}\n{text}")
        guidance.cited[index] = ids
    return guidance


def feedback_from(diagnosis: Diagnosis, guidance: Guidance) -> Feedback:
    """Feedback(kind='optimize'): the top bottleneck, its evidence, and suggestions ranked with citations."""
    suggestions: list[str] = []
    for index, finding in enumerate(diagnosis.findings):
        ids = guidance.cited.get(index, [])
        cite = f" [notes: {', '.join(ids)}]" if ids else ""
        for advice in finding.advice:
            if len(suggestions) >= MAX_SUGGESTIONS:
                break
            if advice not in (s.rsplit(" [notes:", 1)[0] for s in suggestions):
                suggestions.append(advice + cite)
    evidence = diagnosis.text()
    if guidance.error:
        evidence += f"\nNote: {guidance.error}"
    return Feedback(
        kind="optimize",
        summary=diagnosis.summary(),
        evidence=evidence,
        suggestions=suggestions,
        sources=list(guidance.sources),
    )


def merge_advice(diagnosed: Feedback, advice: Feedback | None, *, policy_read_diagnosis: bool) -> Feedback:
    """One Feedback for the coder from the diagnosis and the policy's advice.

    A policy that was given the diagnosis (the LLM verifier) wrote its advice from it, so its summary
    and suggestions lead and the diagnosis's follow; otherwise the diagnosis leads. Evidence keeps
    both; sources are the union, diagnosis notes first.
    """
    if advice is None:
        return diagnosed
    first, second = (advice, diagnosed) if policy_read_diagnosis else (diagnosed, advice)
    suggestions = list(first.suggestions)
    suggestions += [s for s in second.suggestions if s not in suggestions]
    evidence = "\n".join(e for e in (diagnosed.evidence, advice.evidence) if e)
    sources = list(dict.fromkeys([*diagnosed.sources, *advice.sources]))
    return Feedback(
        kind="optimize", summary=first.summary, evidence=evidence, suggestions=suggestions, sources=sources
    )
