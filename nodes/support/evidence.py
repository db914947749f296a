"""Profile evidence: what the profilers say about a candidate or the reference, gathered for the nodes.

Why here: the planner wants the reference's timeline and the profile node wants the candidate's
(and the reference's, once per run); both run the same tools the same way, so the gathering lives
in one place neither node owns. Each tool runs in its own process (`tools.profilers`) and may fail
with a reason; the `Evidence` keeps whatever came back, and the diagnosis (`nodes.diagnosis`) reads it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from graph.artifacts import Candidate, KernelStat, Profile, Task
from graph.context import Context
from tools.profilers.ncu import NcuResult
from tools.profilers.system_profile import format_summary

# "auto" (default): the nsys/torch timeline and ncu on a GPU; "torch": the worker's profile only.
PROFILERS_ENV = "STITCHCUDA_PROFILERS"
NCU_LAUNCHES_ENV = "STITCHCUDA_NCU_LAUNCHES"


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
        return self.system is not None and self.system.get("status") == "ok"


def profilers_mode() -> str:
    """'auto' (timeline and ncu on a GPU) or 'torch' (the worker's profile only), from the environment."""
    mode = os.environ.get(PROFILERS_ENV, "auto").strip().lower()
    return mode if mode in ("auto", "torch") else "auto"


def profile_from_system(summary: dict[str, Any]) -> Profile:
    """A Profile artifact from a system summary (nsys or torch-profiler timeline)."""
    top = [
        KernelStat(
            name=str(k.get("name", "")),
            calls=int(round(float(k.get("calls", 0)))),
            total_ms=float(k.get("total_ms", 0.0)),
            share=float(k.get("share", 0.0)),
        )
        for k in summary.get("top_kernels", [])
    ]
    return Profile(
        source=str(summary.get("source", "nsys")),
        device_ms=float(summary.get("device_ms", 0.0) or 0.0),
        kernel_count=int(round(float(summary.get("kernel_count", 0) or 0))),
        own_kernel_share=float(summary.get("own_kernel_share", 0.0) or 0.0),
        top=top,
        summary=format_summary(summary),
    )


def _tool_options(context: Context) -> dict[str, Any]:
    return {"arch": context.gpu_arch, "timeout_s": context.eval_timeout_s}


def reference_system_profile(task: Task, context: Context) -> dict[str, Any]:
    """The reference's system summary (the planner's view of eager PyTorch), with the same tool."""
    from tools.profilers.system_profile import system_profile

    return system_profile(task.source, None, **_tool_options(context))


def planner_reference_profile(task: Task, context: Context) -> tuple[Profile | None, str]:
    """The reference's system profile for the planner (on a GPU, unless profilers are 'torch'), and a log line.

    The same tool the verifier uses on the candidate (`tools.profilers.system_profile`: Nsight Systems, else
    the PyTorch profiler's timeline), in its own process; any failure leaves the plan without it.
    """
    if context.device != "cuda" or profilers_mode() != "auto":
        return None, ""
    import torch

    if not torch.cuda.is_available():
        return None, ""
    summary = reference_system_profile(task, context)
    if summary.get("status") != "ok":
        return None, f"planner: no reference profile ({summary.get('status')}: {summary.get('reason', '')})"
    profile = profile_from_system(summary)
    return profile, f"planner: reference profile: {profile.summary}"


def gather_gpu_evidence(
    task: Task, candidate: Candidate, context: Context, evidence: Evidence, need_reference: bool
) -> None:
    """Fill in the system profile and the NCU records of the candidate (and the reference's timeline)."""
    from tools.profilers import ncu
    from tools.profilers.system_profile import system_profile

    options = _tool_options(context)
    evidence.system = system_profile(task.source, candidate.source, **options)
    launches = int(os.environ.get(NCU_LAUNCHES_ENV, ncu.DEFAULT_LAUNCH_COUNT))
    evidence.ncu = ncu.profile_kernels(task.source, candidate.source, launch_count=launches, **options)
    if need_reference:
        evidence.reference_system = reference_system_profile(task, context)
