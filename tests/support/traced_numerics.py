"""The traced graph against the reference in float64: how the tests check what the tracer wrote out."""

from __future__ import annotations

from typing import Any

import torch

from codegen.frontend.capture import trace_problem
from graph.artifacts import Task
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
