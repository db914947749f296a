"""The traced graph against the reference in float64: how the tests check what the tracer wrote out."""

from __future__ import annotations

from typing import Any

import torch

from codegen.frontend.capture import trace_problem
from codegen.policy import OfflinePolicy
from graph.artifacts import Plan, Task
from tools.problem import exec_problem_source

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def reference_model(task: Task) -> Any:
    problem = exec_problem_source(task.source, task.name)
    torch.manual_seed(42)
    return problem.Model(*problem.get_init_inputs()), problem


def graph_outputs_in_float64(task: Task, edit: Any = None) -> tuple[list[Any], list[Any]]:
    """(reference outputs, traced graph outputs) on the problem's inputs in float64 (seed 3), the
    graph being what the tracer recorded, decompositions included; `edit` may change the inputs."""
    _, traced = trace_problem(task.source, task.name)
    assert traced.decomposed
    graph_module = torch.fx.GraphModule(traced.root, traced.graph).to_empty(device="cpu")
    reference, problem = reference_model(task)
    graph_module.load_state_dict(reference.state_dict(), strict=False)  # the traced root is on meta
    torch.manual_seed(3)
    inputs = [t.double() if t.is_floating_point() else t for t in problem.get_inputs()]
    if edit is not None:
        edit(inputs)
    return list(reference(*inputs)), list(graph_module(*inputs))


def fully_covered_plan(task: Task) -> Plan:
    """The offline plan of `task`, asserted traced with nothing left to PyTorch."""
    plan = OfflinePolicy().plan(task, None)
    assert plan.traced and plan.uncovered_ops == [], plan.uncovered_ops
    return plan


def assert_graph_matches_in_float64(
    task: Task, outputs: int | None, rtol: float, atol: float, edit: Any = None, equal_nan: bool = False
) -> None:
    """Every traced output equals the reference's in float64 (shape, then values); `outputs`: how
    many there must be (None: any number)."""
    expected, got = graph_outputs_in_float64(task, edit)
    if outputs is not None:
        assert len(got) == len(expected) == outputs
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have.shape == want.shape, index
        torch.testing.assert_close(
            have, want, rtol=rtol, atol=atol, equal_nan=equal_nan, msg=f"output {index}"
        )
