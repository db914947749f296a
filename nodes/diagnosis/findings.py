"""The diagnosis as a whole: ranked findings plus the context every report shows, and its text forms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph.artifacts import Finding
from tools.roofline import SpeedOfLight

KERNELS_SHOWN = 6
OTHER_FINDINGS_SHOWN = 5


def pct_text(pct: float | None) -> str:
    """'93%' or '0.11%': two significant digits below 10%."""
    if pct is None:
        return "SOL unknown"
    return f"{pct:.0f}%" if pct >= 10 else f"{pct:.2g}%"


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
            for k in self.kernels[:KERNELS_SHOWN]:
                lines.append("  " + kernel_line(k))
        others = self.findings[1 : 1 + OTHER_FINDINGS_SHOWN]
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


def kernel_line(k: dict[str, Any]) -> str:
    """One row of the kernel table as text: share, calls, time, class and the headline metrics."""
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
