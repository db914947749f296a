"""Program-level rules: the whole forward's launch overhead, host round trips, traffic and SOL gap.

Each function measures what its finding needs from the `Facts` and returns zero or one finding; the
wording, thresholds and weights are the catalogue's rows (`nodes.diagnosis.catalogue`).
"""

from __future__ import annotations

from typing import Any

from graph.artifacts import Finding
from nodes.diagnosis import catalogue as c
from nodes.diagnosis.facts import Facts
from nodes.diagnosis.findings import pct_text

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


def launch_bound(facts: Facts) -> list[Finding]:
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
    rule = c.rule("launch-bound", "graphed" if graphs > 0 else "")
    limits = rule.limits
    mean_us = facts.wall_ms * 1e3 * (1 - idle) / kernels if kernels and facts.wall_ms else None
    few_long = kernels < limits["few_kernels"] and (mean_us is None or mean_us > limits["long_kernel_us"])
    if idle < limits["idle"] or few_long:
        return []
    return [rule.make(rule.weight * idle, evidence, idle=idle, kernels=kernels)]


def host_bound(facts: Facts) -> list[Finding]:
    """The timed call's own host time (the verifier's `issue` clock), beside eager's: a forward whose
    library calls or Python work keep the GPU waiting, however few kernels it launches. Not for a
    forward already replayed from a CUDA graph (its host time is the graph launch and the copies)."""
    test = facts.test
    if test is None or not test.candidate_issue_ms or not test.candidate_ms or not facts.evidence.on_gpu:
        return []
    system = facts.evidence.system if facts.evidence.system_ok else None
    if system and float(system.get("graph_launches", 0.0)) > 0:
        return []
    rule = c.HOST_BOUND
    issue_us = test.candidate_issue_ms * 1e3
    excess_us = issue_us - (test.eager_issue_ms or 0.0) * 1e3
    share = test.candidate_issue_ms / test.candidate_ms
    if share < rule.limits["share"] or excess_us < rule.limits["excess_us"]:
        return []
    evidence = {
        "candidate_issue_us": round(issue_us, 1),
        "eager_issue_us": round((test.eager_issue_ms or 0.0) * 1e3, 1),
        "candidate_ms": test.candidate_ms,
    }
    impact = rule.weight * min(1.0, excess_us / 1e3 / test.candidate_ms)
    return [rule.make(impact, evidence, issue_us=issue_us, share=share, excess_us=excess_us)]


def host_syncs(facts: Facts) -> list[Finding]:
    system = facts.evidence.system if facts.evidence.system_ok else None
    if not system:
        return []
    rule = c.HOST_SYNC
    syncs = system.get("host_syncs", {})
    count = float(syncs.get("count", 0.0))
    copies = system.get("copies", {})
    dtoh = float(copies.get("DtoH", {}).get("count", 0.0))
    if count < rule.limits["events"] and dtoh < rule.limits["events"]:
        return []
    idle = 1.0 - float(system.get("gpu_busy_pct", 100.0)) / 100.0
    calls = ", ".join(f"{k} x{v:g}" for k, v in syncs.get("calls", {}).items())
    evidence = {
        "syncs_per_forward": count,
        "calls": calls,
        "dtoh_copies": dtoh,
        "gpu_busy_pct": system.get("gpu_busy_pct"),
    }
    impact = min(rule.limits["cap"], max(rule.limits["floor"], idle))
    return [rule.make(impact, evidence, count=count, dtoh=dtoh)]


def transfers(facts: Facts) -> list[Finding]:
    system = facts.evidence.system if facts.evidence.system_ok else None
    if not system or not facts.wall_ms:
        return []
    copies = system.get("copies", {})
    moved = {k: v for k, v in copies.items() if k in ("HtoD", "DtoH", "HtoH") and v.get("bytes", 0) > 0}
    if not moved:
        return []
    rule = c.HOST_TRANSFERS
    ms = sum(float(v.get("ms", 0.0)) for v in moved.values())
    nbytes = sum(float(v.get("bytes", 0.0)) for v in moved.values())
    evidence = {k: f"{v['count']:g}x {v['bytes'] / 1e6:.3g} MB" for k, v in moved.items()}
    impact = min(rule.limits["cap"], max(rule.limits["floor"], ms / facts.wall_ms))
    return [rule.make(impact, evidence, megabytes=nbytes / 1e6, ms=ms)]


def redundant_passes(facts: Facts) -> list[Finding]:
    plan, ncu = facts.plan, facts.evidence.ncu
    if plan is None or not plan.total_bytes or facts.sol is None:
        return []
    if ncu is None or not ncu.ok or ncu.truncated:
        return []
    measured = sum(k.dram_bytes or 0.0 for k in ncu.kernels)
    if not measured:
        return []
    rule = c.REDUNDANT_PASSES
    memory_share = sum(g["share"] for g in facts.groups if g["class"] == "memory-bound")
    memory_bound = facts.sol.bound == "memory"
    ratio = measured / plan.total_bytes
    if ratio < rule.limits["ratio"] or (memory_share < rule.limits["memory_share"] and not memory_bound):
        return []
    weight = max(memory_share, rule.limits["memory_bound_weight"] if memory_bound else 0.0)
    evidence = {
        "dram_bytes": measured,
        "minimum_bytes": plan.total_bytes,
        "ratio": round(ratio, 2),
        "kernels": len(ncu.kernels),
    }
    impact = (1.0 - 1.0 / ratio) * weight * facts.busy_fraction
    return [rule.make(impact, evidence, ratio=ratio, minimum_mb=plan.total_bytes / 1e6)]


def tensor_cores(facts: Facts) -> list[Finding]:
    plan, sol = facts.plan, facts.sol
    if (
        plan is None
        or sol is None
        or not plan.total_flops
        or sol.bound != "compute"
        or not facts.evidence.on_gpu
    ):
        return []
    limits = c.NO_TENSOR_CORES.limits
    gemm_flops = sum(o.flops for o in plan.ops if o.op in GEMM_OPS)
    share = gemm_flops / plan.total_flops
    if share < limits["gemm_share"]:
        return []
    compute = [g for g in facts.groups if g["class"] == "compute-bound"] or facts.groups[:1]
    tensor = [g["exemplar"].tensor_pipe_pct for g in compute if g["exemplar"].tensor_pipe_pct is not None]
    if tensor and max(tensor) >= limits["tensor_pipe_pct"]:
        return []
    time_share = sum(g["share"] for g in compute) * facts.busy_fraction if compute else facts.busy_fraction
    fma = [g["exemplar"].fma_pipe_pct for g in compute if g["exemplar"].fma_pipe_pct is not None]
    evidence: dict[str, Any] = {"gemm_flop_share": round(share, 3), "precision": facts.precision}
    if tensor:
        evidence["tensor_pipe_pct"] = max(tensor)
    if fma:
        evidence["fma_pipe_pct"] = max(fma)
    rule = c.rule("no-tensor-cores", "fp32" if facts.precision == "fp32" else "")
    return [rule.make(rule.weight * time_share, evidence, precision=facts.precision)]


def sol_gap(facts: Facts) -> list[Finding]:
    """Always there when SOL is known: how far the program is from it, as a low-priority finding."""
    sol = facts.sol
    pct = sol.pct_of_sol(facts.wall_ms) if sol is not None else None
    if sol is None or pct is None or not facts.evidence.on_gpu:
        return []
    bound = sol.bound
    rule = c.rule("sol-gap", bound)
    evidence = {
        "measured_ms": facts.wall_ms,
        "sol_ms": round(sol.sol_ms, 6),
        "pct_of_sol": round(pct, 1),
    }
    return [
        rule.make(
            rule.weight * max(0.0, 1.0 - pct / 100.0),
            evidence,
            pct=pct_text(pct),
            bound=bound,
            sol_ms=sol.sol_ms,
            unit="DRAM" if bound == "memory" else "SM",
        )
    ]


def no_gpu(facts: Facts) -> list[Finding]:
    if facts.evidence.on_gpu:
        return []
    return [c.NO_GPU.make(0.0, {"device": facts.evidence.device or "unknown"})]
