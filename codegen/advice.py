"""Rule-based diagnosis of a passing candidate, and the optimisations the offline policy can apply.

The diagnosis reads the profile (launch count, device time, share of the candidate's own kernels,
the dominant kernel) against the plan's speed of light (FLOPs at 51 TFLOP/s fp32 GEMM, bytes at
4.3 TB/s on the H200). Suggestions carry a tag in brackets, e.g. `[cuda_graph]`, that the optimise
step recognises; free-text advice from another policy is matched by keywords.
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.emit.assemble import Options
from codegen.schedule.plan import speed_of_light_ms
from graph.artifacts import Feedback, Plan, Profile, TestResult

LAUNCH_BOUND_KERNEL_US = 10.0
HOST_OVERHEAD_RATIO = 1.5

_KEYWORDS = {
    "cuda_graph": (
        "[cuda_graph]",
        "cuda graph",
        "cuda-graph",
        "cudagraph",
        "launch overhead",
        "launch-bound",
    ),
    "ew_unroll": ("[ew_unroll]", "unroll", "vector width", "bytes in flight", "wider loads"),
}


@dataclass
class Optimisation:
    name: str
    options: Options
    summary: str


def _own(name: str) -> bool:
    return "stitch" in name.lower()


def diagnose(plan: Plan, test: TestResult, profile: Profile) -> Feedback:
    """Turn one profile into ranked, tagged suggestions."""
    suggestions: list[str] = []
    evidence: list[str] = []
    candidate_ms = test.candidate_ms if test.candidate_ms is not None else profile.device_ms
    sol_ms = speed_of_light_ms(plan.total_flops, plan.total_bytes)
    pct = 100.0 * sol_ms / candidate_ms if candidate_ms and candidate_ms > 0 else 0.0
    evidence.append(
        f"time {candidate_ms:.4f} ms, device {profile.device_ms:.4f} ms, speed of light {sol_ms:.4f} ms ({pct:.0f}%)"
    )
    mean_us = profile.device_ms * 1e3 / max(profile.kernel_count, 1)
    evidence.append(
        f"{profile.kernel_count} kernels per forward, mean {mean_us:.1f} us; own kernels {profile.own_kernel_share:.0%}"
    )
    host_bound = candidate_ms > HOST_OVERHEAD_RATIO * profile.device_ms and profile.kernel_count > 1
    launch_bound = profile.kernel_count >= 6 and mean_us < LAUNCH_BOUND_KERNEL_US
    summary = f"at {pct:.0f}% of speed of light"
    if launch_bound or host_bound:
        why = (
            "host/launch overhead exceeds device time"
            if host_bound
            else f"{profile.kernel_count} short kernels"
        )
        summary = f"launch-bound: {why}; {summary}"
        suggestions.append(
            "[cuda_graph] capture the whole forward in a CUDA graph (static input buffers, cloned output)"
        )
    top = profile.top[0] if profile.top else None
    if top is not None:
        evidence.append(
            f"dominant kernel {top.name} ({top.share:.0%}, {top.total_ms:.4f} ms over {top.calls} calls)"
        )
        if not launch_bound and not host_bound:
            summary = f"dominant kernel {top.name} takes {top.share:.0%}; {summary}"
        lowered = top.name.lower()
        if _own(top.name) and "ew" in lowered:
            suggestions.append(
                "[ew_unroll] more bytes in flight per thread in the elementwise kernel (two float4 per step)"
            )
        elif _own(top.name):
            suggestions.append(
                "the dominant row kernel is ours: check the row-length variant (warp vs block per row)"
            )
        elif any(k in lowered for k in ("gemm", "sgemm", "cutlass", "xmma", "cublas")):
            suggestions.append(
                "GEMM-bound in cuBLASLt fp32 (TF32 is not allowed at 1e-4): little left at this level"
            )
    if profile.own_kernel_share < 0.5 and plan.uncovered_ops:
        suggestions.append(
            f"own kernels are {profile.own_kernel_share:.0%} of device time; uncovered ops {plan.uncovered_ops} dominate"
        )
    if pct < 30 and not suggestions:
        suggestions.append("far from speed of light: fuse more ops to cut memory traffic")
    return Feedback(kind="optimize", summary=summary, evidence="\n".join(evidence), suggestions=suggestions)


def requested(feedback: Feedback) -> list[str]:
    """Optimisation names the feedback asks for, in its order."""
    names: list[str] = []
    for text in [feedback.summary, *feedback.suggestions]:
        lowered = text.lower()
        for name, words in _KEYWORDS.items():
            if name not in names and any(w in lowered for w in words):
                names.append(name)
    return names


def choose_optimisation(
    feedback: Feedback, options: Options, traced: bool, launches: int, has_elementwise: bool
) -> Optimisation | None:
    """The first applicable optimisation the feedback asks for (or a default by the program's shape)."""
    applicable: dict[str, Optimisation] = {}
    if traced and not options.cuda_graph and launches >= 2:
        new = Options(options.arch, True, options.ew_unroll, dict(options.levels))
        applicable["cuda_graph"] = Optimisation(
            "cuda_graph", new, "optimize: capture the forward in a CUDA graph"
        )
    if has_elementwise and options.ew_unroll == 1:
        new = Options(options.arch, options.cuda_graph, 2, dict(options.levels))
        applicable["ew_unroll"] = Optimisation(
            "ew_unroll", new, "optimize: two float4 per thread per step in elementwise kernels"
        )
    for name in requested(feedback):
        if name in applicable:
            return applicable[name]
    if not requested(feedback):
        for name in ("cuda_graph", "ew_unroll"):
            if name in applicable and (name != "cuda_graph" or launches >= 6):
                return applicable[name]
    return None
