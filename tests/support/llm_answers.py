"""Scripted LLM answers the stub server replays, defined once for every test that needs them."""

from __future__ import annotations

from typing import Any


def plan_answer(
    task: str = "scale_relu",
    nodes: tuple[str, ...] = ("sub", "relu", "mul"),
    group: str = "g1",
    template: str = "one fused grid-stride kernel",
    title: str = "Write the fused sub+relu+mul kernel",
) -> dict[str, Any]:
    """A planner's answer (the Plan schema's fields an LLM fills): one covered elementwise group."""
    return {
        "task": task,
        "groups": [
            {"id": group, "kind": "elementwise", "nodes": list(nodes), "template": template, "covered": True}
        ],
        "subtasks": [{"id": "s1", "title": title, "groups": [group]}],
        "host": {"buffers": [], "streams": 1, "cuda_graph": False, "notes": ""},
        "covered_ops": list(nodes),
        "uncovered_ops": [],
        "notes": "memory-bound: one read, one write",
    }


SCALE_RELU_PLAN = plan_answer()
"""The plan for tests/fixtures/problems/scale_relu.py: sub, relu and mul in one fused kernel."""

RELU_PLAN = plan_answer(
    task="whatever the model says",  # the policy keeps the task's own name
    nodes=("relu",),
    group="g_relu",
    template="vectorised float4 grid-stride kernel",
    title="Write the float4 ReLU kernel",
)
"""The plan for a lone ReLU, with a model-chosen group id."""


def coder_answer(program: str, summary: str) -> str:
    """A coder's answer as the prompts ask for it: a summary line, then the program in one fence."""
    return f"Summary: {summary}\n\n```python\n{program}```\n"
