"""Run a generated program at a demotion level on the CPU against its reference.

Why shared: every op family checks that its groups, demoted to PyTorch (level 2), keep the ops they
absorbed in graph order; at level 2 the program is all PyTorch, so the CPU can run it. Each family
test only supplies its problem text.
"""

from __future__ import annotations

from typing import Any

import torch

from codegen.emit.assemble import Options, assemble
from codegen.schedule.plan import analyse
from graph.artifacts import Task


def assert_demoted_program_matches(task: Task, level: int = 2) -> None:
    """The program of `task` with every covered group at `level`, against the reference."""
    analysis = analyse(task)
    levels = {s.group.id: level for s in analysis.steps if s.group is not None and s.group.covered}
    program = assemble(analysis, Options(levels=levels))
    namespace: dict[str, Any] = {}
    exec(compile(task.source, "<reference>", "exec"), namespace)
    torch.manual_seed(0)  # both models draw the same parameters, as KernelBench seeds them
    reference = namespace["Model"]()
    exec(compile(program.source, "<program>", "exec"), namespace)
    torch.manual_seed(0)
    candidate = namespace["ModelNew"]()
    inputs = namespace["get_inputs"]()
    expected = reference(*inputs)
    got = candidate(*inputs)
    torch.testing.assert_close(got, expected)
