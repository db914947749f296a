"""Kernel-level rules: one ncu kernel group's access pattern, occupancy, spills, divergence and class.

Every finding is weighted by the kernel's share of the forward (its share of profiled kernel time x
the GPU's busy fraction). A library's kernel (cuBLAS, CUTLASS, cuDNN, PyTorch's own, CUB) gets no
code-level rules: its registers, shared memory, branches and spills are its authors' choices, while
its access pattern and boundedness still follow from the shapes and layouts it is given. Wording,
thresholds and weights are the catalogue's rows (`nodes.diagnosis.catalogue`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graph.artifacts import Finding
from nodes.diagnosis import catalogue as c
from nodes.diagnosis.facts import Facts
from tools.profilers.ncu import KernelMetrics

MIN_KERNEL_SHARE = 0.02  # kernels below this share of the profiled kernel time get no kernel rules

# Kernels whose code is a library's: advice to edit their code is useless; what helps is changing
# how they are called (batch, fuse, reformulate).
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
class KernelView:
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


def kernel_rules(facts: Facts) -> list[Finding]:
    """Every kernel rule over every kernel group above MIN_KERNEL_SHARE, largest group first."""
    findings: list[Finding] = []
    for group in facts.groups:
        if group["share"] < MIN_KERNEL_SHARE:
            continue
        k: KernelMetrics = group["exemplar"]
        kernel = KernelView(
            k,
            k.base_name or k.name,
            group["class"],
            group["share"],
            group["share"] * facts.busy_fraction,
            library=is_library_kernel(k.name),
        )
        code_rules: tuple[Callable[[KernelView], list[Finding]], ...] = (
            () if kernel.library else (bank_conflicts, occupancy, spills, divergence)
        )
        for rule in (coalescing, *code_rules, class_finding):
            findings += rule(kernel)
    return findings


_ACCESSES = (
    ("load", "ld"),
    ("store", "st"),
)


def coalescing(kernel: KernelView) -> list[Finding]:
    k = kernel.k
    rule = c.UNCOALESCED
    limits = rule.limits
    candidates = []
    for kind, op in _ACCESSES:
        pct = getattr(k, f"global_{kind}_bytes_per_sector_pct")
        spr = getattr(k, f"global_{kind}_sectors_per_request")
        # 0% is no evidence: the SASS-patched byte count misses cp.async (LDGSTS) loads, so a cuBLAS
        # GEMM reads 0% used bytes at 4 sectors per request (perfectly coalesced) on the H200.
        if pct:
            efficiency = pct / 100.0
        elif spr is not None and spr > limits["sectors_per_request"]:
            efficiency = limits["coalesced_sectors"] / spr
        else:
            continue
        if efficiency < limits["efficiency"]:
            candidates.append((efficiency, kind, op, pct, spr))
    if not candidates:
        return []
    efficiency, kind, op, pct, spr = min(candidates)
    evidence: dict[str, Any] = {}
    if pct is not None:
        evidence[f"global_{kind}_bytes_used_per_sector_pct"] = pct
    if spr is not None:
        evidence[f"global_{kind}_sectors_per_request"] = round(spr, 2)
    impact = kernel.share * (1.0 - efficiency) * rule.weight
    return [_make(rule, kernel, impact, evidence, kind=kind, op=op, efficiency=efficiency)]


def bank_conflicts(kernel: KernelView) -> list[Finding]:
    k = kernel.k
    rule = c.BANK_CONFLICTS
    ratio = k.bank_conflict_ratio  # share of shared-memory wavefronts that are conflict replays
    wavefronts = (k.shared_load_wavefronts or 0.0) + (k.shared_store_wavefronts or 0.0)
    if ratio is None or ratio < rule.limits["conflict_share"] or wavefronts < rule.limits["wavefronts"]:
        return []
    evidence = {
        "bank_conflicts": (k.shared_load_bank_conflicts or 0.0) + (k.shared_store_bank_conflicts or 0.0),
        "shared_wavefronts": wavefronts,
        "conflict_share": round(ratio, 3),
    }
    return [_make(rule, kernel, kernel.share * ratio * rule.weight, evidence, ratio=ratio)]


def occupancy(kernel: KernelView) -> list[Finding]:
    k = kernel.k
    theoretical, limiter = k.theoretical_occupancy_pct, k.occupancy_limiter
    limit = c.LOW_OCCUPANCY_REGISTERS.limits["theoretical_pct"]
    if theoretical is None or theoretical >= limit or limiter not in ("registers", "shared_mem"):
        return []
    if kernel.cls == "compute-bound":
        return []
    if limiter == "registers":
        rule = c.LOW_OCCUPANCY_REGISTERS
        evidence = {
            "registers_per_thread": k.registers_per_thread,
            "theoretical_occupancy_pct": theoretical,
            "achieved_occupancy_pct": k.achieved_occupancy_pct,
            "block_limit_registers": k.limit_registers,
        }
    else:
        rule = c.LOW_OCCUPANCY_SHARED
        evidence = {
            "shared_mem_per_block": k.shared_mem_per_block,
            "theoretical_occupancy_pct": theoretical,
            "achieved_occupancy_pct": k.achieved_occupancy_pct,
            "block_limit_shared_mem": k.limit_shared_mem,
        }
    impact = kernel.share * (1.0 - theoretical / 100.0) * rule.weight
    values = {"registers": k.registers_per_thread or 0, "kib": (k.shared_mem_per_block or 0) / 1024}
    return [_make(rule, kernel, impact, evidence, theoretical=theoretical, **values)]


def spills(kernel: KernelView) -> list[Finding]:
    k = kernel.k
    rule = c.REGISTER_SPILLS
    local = k.local_sectors
    global_sectors = (k.global_load_sectors or 0.0) + (k.global_store_sectors or 0.0)
    if not local or local < rule.limits["local_share"] * max(global_sectors, 1.0):
        return []
    ratio = local / max(global_sectors, 1.0)
    evidence = {
        "local_sectors": local,
        "global_sectors": global_sectors,
        "registers_per_thread": k.registers_per_thread,
    }
    impact = kernel.share * min(rule.limits["cap"], rule.limits["scale"] * ratio)
    return [_make(rule, kernel, impact, evidence, ratio=ratio)]


def divergence(kernel: KernelView) -> list[Finding]:
    """Lanes masked off: active threads per instruction first (what divergence costs), branch uniformity else.

    Branch uniformity alone misleads both ways on real records: a branch-free kernel reads 0%, and a
    kernel whose lanes split once before two long uniform loops reads 99% while half its lanes idle.
    """
    k = kernel.k
    rule = c.WARP_DIVERGENCE
    efficiency, uniform = k.simt_efficiency, k.branch_uniformity_evidence
    evidence: dict[str, Any] = {}
    if efficiency is not None:
        if efficiency >= rule.limits["simt_efficiency"]:
            return []
        lost = 1.0 - efficiency
        evidence.update(
            threads_per_instruction=k.threads_per_instruction, simt_efficiency=round(efficiency, 3)
        )
    elif uniform is not None and uniform < rule.limits["branch_uniformity_pct"]:
        lost = 1.0 - uniform / 100.0
        rule = c.WARP_DIVERGENCE_BRANCHES
    else:
        return []
    if uniform is not None:
        evidence["branch_uniformity_pct"] = uniform
    if k.branch_instructions is not None:
        evidence["branch_instructions"] = k.branch_instructions
    values = {"threads": k.threads_per_instruction, "efficiency": efficiency, "uniform": uniform}
    return [_make(rule, kernel, kernel.share * lost * rule.weight, evidence, **values)]


def small_grid(kernel: KernelView) -> c.Rule:
    """Less than one wave: our kernel should launch more blocks; a library kernel should get more work per call."""
    if not kernel.library:
        return c.SMALL_GRID
    return c.rule("small-grid", "library-gemm" if _GEMM_KERNEL.search(kernel.k.name) else "library")


def class_finding(kernel: KernelView) -> list[Finding]:
    """What the kernel's boundedness itself says: at the bandwidth roof, compute-bound, or latency-bound."""
    k = kernel.k
    dram = k.dram_throughput_pct
    sm = k.sm_throughput_pct or 0.0
    memory = k.memory_throughput_pct if k.memory_throughput_pct is not None else (dram or 0.0)
    if kernel.cls == "memory-bound":
        rule = c.MEMORY_BOUND
        evidence: dict[str, Any] = {
            "memory_throughput_pct": memory,
            "dram_throughput_pct": dram,
            "sm_throughput_pct": sm,
        }
        impact = kernel.share * max(rule.limits["headroom"], 1.0 - memory / 100.0) * rule.weight
        return [_make(rule, kernel, impact, evidence, memory=memory)]
    if kernel.cls == "compute-bound":
        rule = c.rule("compute-bound", "library" if kernel.library else "")
        evidence = {
            "sm_throughput_pct": sm,
            "fma_pipe_pct": k.fma_pipe_pct,
            "issue_active_pct": k.issue_active_pct,
        }
        impact = kernel.share * max(rule.limits["headroom"], 1.0 - sm / 100.0) * rule.weight
        return [_make(rule, kernel, impact, evidence, sm=sm)]
    if kernel.cls != "latency-bound":
        return []
    return [_latency_bound(kernel, sm, memory)]


def _latency_bound(kernel: KernelView, sm: float, memory: float) -> Finding:
    """Labelled and advised by the top stall reason; small-grid symptoms and advice first when < 1 wave."""
    k = kernel.k
    stalls = k.top_stalls(1)
    reason = stalls[0][0] if stalls else ""
    rule = c.rule("latency-bound", reason)
    evidence: dict[str, Any] = {
        "sm_throughput_pct": sm,
        "memory_throughput_pct": memory,
        "duration_us": round((k.duration_ns or 0) / 1e3, 3),
    }
    if stalls:
        evidence["top_stall"] = f"{stalls[0][0]} ({stalls[0][2]:.0%} of stalls)"
    symptoms = list(rule.symptoms)
    metrics = ([c.STALL_METRIC.format(reason=reason)] if reason else []) + list(rule.metrics)
    extra: list[str] = []
    waves = k.waves_per_sm
    if waves is not None and waves < c.SMALL_GRID.limits["waves"]:
        evidence["waves_per_sm"] = waves
        grid = small_grid(kernel)
        symptoms += grid.symptoms
        metrics += grid.metrics
        extra += [a.format(name=kernel.name, waves=waves) for a in grid.advice]
    own = [a.format(name=kernel.name) for a in rule.advice]
    advice = extra if kernel.library else [*extra, *own]  # a library's code is not ours to tune
    impact = kernel.share * (1.0 - max(sm, memory) / 100.0) * rule.weight
    return _make(rule, kernel, impact, evidence, symptoms=symptoms, metrics=metrics, advice=advice)


def _make(
    rule: c.Rule, kernel: KernelView, impact: float, evidence: dict[str, Any], **values: Any
) -> Finding:
    """The row's finding about this kernel: its name, place and share are in every template's reach."""
    return rule.make(
        impact,
        evidence,
        kernel.name,
        name=kernel.name,
        where=kernel.where,
        kernel_share=kernel.kernel_share,
        **values,
    )
