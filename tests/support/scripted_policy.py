"""A scripted policy for graph tests: the only fake, and it sits at the policy seam.

It answers the coder with programs from a script (or raises what the script says), records what
each call was given, and plans/advises with fixed artifacts. Everything else in a test run (the
worker subprocess, real builds, correctness and timing) is real.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph.artifacts import Candidate, Feedback, FusionGroup, Plan, Profile, Subtask, Task, TestResult
from graph.context import Context
from graph.policy import register_policy, unregister_policy

SCALE_RELU_HEAD = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
"""

# relu(x - 0.5) * 3: runs, but is wrong.
WRONG = (
    SCALE_RELU_HEAD
    + """
    def forward(self, x):
        return torch.relu(x - 0.5) * 3.0
"""
)

# Fails in g++: the graph must take the fix branch with the compiler's error as evidence.
BUILD_ERROR = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="scripted_broken", cpp_sources="int broken( { return 0; }", no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()

    def forward(self, x):
        return x
"""

# A real C++ extension (pybind11 binding over raw pointers) that runs on the CPU.
CORRECT_CPP = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <pybind11/pybind11.h>
#include <cstdint>
static void scale_relu(std::uintptr_t x, std::uintptr_t y, int64_t n, double scale) {
  const float* in = reinterpret_cast<const float*>(x);
  float* out = reinterpret_cast<float*>(y);
  const float s = static_cast<float>(scale);
  for (int64_t i = 0; i < n; ++i) { float v = in[i] - 0.5f; out[i] = (v > 0.f ? v : 0.f) * s; }
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale_relu", &scale_relu); }
"""

_ext = load_inline(name="scripted_scale_relu", cpp_sources=CPP_SRC, no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.scale_relu(x.data_ptr(), y.data_ptr(), x.numel(), float(self.scale))
        return y
'''

# Correct on every trial, but a try/except fallback to PyTorch: the hack checks must reject it.
HACKED = (
    SCALE_RELU_HEAD
    + """
    def forward(self, x):
        try:
            return torch.ops.stitch.scale_relu(x, self.scale)
        except Exception:
            return torch.relu(x - 0.5) * self.scale
"""
)

# A second correct version (different source), standing in for an optimisation.
OPTIMIZED = (
    SCALE_RELU_HEAD
    + """
    def forward(self, x):
        return torch.clamp_min(x - 0.5, 0.0).mul_(self.scale)
"""
)


@dataclass
class Call:
    method: str
    mode: str
    feedback_kind: str | None = None
    previous_id: int | None = None


@dataclass
class ScriptedPolicy:
    """Answers write/revise from `script` in order; an Exception entry is raised instead."""

    script: list[Any]
    name: str = "scripted"
    calls: list[Call] = field(default_factory=list)

    def plan(self, task: Task, reference_profile: Profile | None) -> Plan:
        group = FusionGroup(
            id="g1", kind="elementwise", nodes=["sub", "relu", "mul"], template="scripted", covered=True
        )
        return Plan(
            task=task.name,
            groups=[group],
            subtasks=[Subtask(id="s1", title="fused sub+relu+mul kernel", groups=["g1"])],
            covered_ops=["sub", "relu", "mul"],
        )

    def _next(self, mode: str, candidate_id: int, parent: int | None) -> Candidate:
        entry = self.script.pop(0)
        if isinstance(entry, BaseException):
            raise entry
        return Candidate(
            id=candidate_id,
            source=entry,
            mode=mode,
            parent=parent,
            policy=self.name,
            summary=f"scripted {mode}",
        )

    def write(self, task: Task, plan: Plan, candidate_id: int) -> Candidate:
        self.calls.append(Call("write", "write"))
        return self._next("write", candidate_id, None)

    def revise(self, task, plan, previous, feedback, mode, candidate_id):  # noqa: ANN001
        self.calls.append(Call("revise", mode, feedback.kind, previous.id))
        return self._next(mode, candidate_id, previous.id)

    def advise(
        self, task: Task, plan: Plan, candidate: Candidate, test: TestResult, profile: Profile
    ) -> Feedback:
        self.calls.append(Call("advise", "optimize"))
        return Feedback(kind="optimize", summary="scripted advice", suggestions=["fuse more"])


def install(policy: ScriptedPolicy) -> None:
    register_policy(policy.name, lambda context: policy)


def uninstall(policy: ScriptedPolicy) -> None:
    unregister_policy(policy.name)


def cpu_context(**overrides: Any) -> Context:
    """A context for CPU-run graph tests: small budgets, few trials."""
    settings: dict[str, Any] = dict(
        policy="scripted",
        device="cpu",
        correctness_trials=2,
        perf_trials=5,
        eval_timeout_s=300.0,
        max_iterations=6,
        max_fix_attempts=3,
        max_optimize_rounds=1,
    )
    settings.update(overrides)
    return Context(**settings)
