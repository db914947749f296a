"""The numbers several rules need, computed once from the evidence, the plan and the timing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graph.artifacts import Plan, TestResult
from nodes.support.evidence import Evidence
from tools.profilers.ncu import NcuResult, kernel_groups
from tools.roofline import Ceilings, SpeedOfLight, classify_kernel, speed_of_light


@dataclass
class Facts:
    """What every rule function reads."""

    evidence: Evidence
    plan: Plan | None
    test: TestResult | None
    sol: SpeedOfLight | None
    wall_ms: float | None  # one forward, as timed (or as profiled)
    busy_fraction: float  # device time / wall time, 0..1
    groups: list[dict[str, Any]]  # ncu kernel groups with their class
    precision: str


def wall_ms(evidence: Evidence, test: TestResult | None) -> float | None:
    """One forward's time: the verifier's timing, else the timeline's wall time, else device time."""
    if test is not None and test.candidate_ms:
        return test.candidate_ms
    if evidence.system is not None and evidence.system_ok:
        return evidence.system.get("wall_ms")
    if evidence.profile is not None:
        return evidence.profile.device_ms
    ncu = evidence.ncu
    if ncu is not None and ncu.ok and not ncu.truncated:
        return sum(k.duration_ns or 0.0 for k in ncu.kernels) / 1e6 or None
    return None


def device_ms(evidence: Evidence) -> float | None:
    if evidence.system is not None and evidence.system_ok:
        return evidence.system.get("device_ms")
    return evidence.profile.device_ms if evidence.profile else None


def classified_groups(ncu: NcuResult | None) -> list[dict[str, Any]]:
    """The ncu kernel groups (largest share first), each with its roofline class."""
    groups = []
    if ncu is not None and ncu.ok:
        for group in kernel_groups(ncu.kernels):
            group["class"] = classify_kernel(group["exemplar"])[0]
            groups.append(group)
    return groups


def gather_facts(
    evidence: Evidence, plan: Plan | None, test: TestResult | None, ceilings: Ceilings | None, precision: str
) -> Facts:
    """SOL (when the plan has work and the ceilings are known), the forward's time and busy fraction."""
    sol = None
    if plan is not None and ceilings is not None and (plan.total_flops or plan.total_bytes):
        sol = speed_of_light(plan.total_flops, plan.total_bytes, ceilings, precision)
    wall = wall_ms(evidence, test)
    device = device_ms(evidence)
    busy = min(1.0, device / wall) if wall and device else 1.0
    return Facts(evidence, plan, test, sol, wall, busy, classified_groups(evidence.ncu), precision)
