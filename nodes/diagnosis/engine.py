"""The engine: run every rule over the facts, rank the findings, and collect what the tools could not see."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graph.artifacts import Finding, Plan, TestResult
from nodes.diagnosis import kernel_rules, program_rules
from nodes.diagnosis.facts import Facts, gather_facts
from nodes.diagnosis.findings import Diagnosis
from nodes.support.evidence import Evidence
from tools.profilers.ncu import KernelMetrics, NcuResult, kernel_groups
from tools.profilers.system_profile import format_summary
from tools.roofline import Ceilings, classify_kernel

RuleFunction = Callable[[Facts], list[Finding]]

RULES: tuple[RuleFunction, ...] = (
    program_rules.launch_bound,
    program_rules.host_bound,
    program_rules.host_syncs,
    program_rules.transfers,
    program_rules.redundant_passes,
    program_rules.tensor_cores,
    kernel_rules.kernel_rules,
    program_rules.sol_gap,
    program_rules.no_gpu,
)
"""In this order; a stable sort by impact keeps it among findings of equal impact."""


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


def tool_notes(evidence: Evidence, facts: Facts) -> list[str]:
    """What the reader should know about the evidence itself: failed or partial tools, assumed ceilings."""
    notes = []
    if evidence.on_gpu and evidence.ncu is not None and not evidence.ncu.ok:
        notes.append(f"ncu: {evidence.ncu.status}: {evidence.ncu.reason}")
    if evidence.ncu is not None and evidence.ncu.truncated:
        notes.append(f"ncu profiled only the first {evidence.ncu.launch_count} launches of the forward")
    if evidence.system is not None and evidence.system.get("status") != "ok":
        notes.append(f"system profile: {evidence.system.get('status')}: {evidence.system.get('reason', '')}")
    if evidence.system is not None and evidence.system.get("fallback_reason"):
        notes.append(f"system profile from the PyTorch profiler ({evidence.system['fallback_reason']})")
    if facts.sol is not None and facts.sol.ceilings_source.startswith("assumed"):
        notes.append(f"ceilings {facts.sol.ceilings_source}")
    return notes


def diagnose(
    evidence: Evidence,
    *,
    plan: Plan | None = None,
    test: TestResult | None = None,
    ceilings: Ceilings | None = None,
    precision: str = "fp32",
) -> Diagnosis:
    """Run every rule over the evidence and rank the findings by the time at stake."""
    facts = gather_facts(evidence, plan, test, ceilings, precision)
    findings = [f for rule in RULES for f in rule(facts)]
    findings.sort(key=lambda f: -f.impact)
    system_line = (
        format_summary(evidence.system) if evidence.system is not None and evidence.system_ok else ""
    )
    return Diagnosis(
        findings,
        facts.sol,
        facts.wall_ms,
        kernel_table(evidence.ncu),
        system_line,
        tool_notes(evidence, facts),
    )
