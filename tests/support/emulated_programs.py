"""Generated programs run in the CPU emulation (tools/emulation) beside their PyTorch reference: the
helpers the emulation tests share."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
import torch

from tools.emulation.program import Unsupported, load_program


def program_source(path: Path, levels: int | None = None) -> str:
    """The offline policy's program of `path` for sm_90, every covered group at demotion `levels`."""
    from codegen.emit.assemble import Options, assemble
    from codegen.schedule.plan import analyse
    from graph.artifacts import Task

    analysis = analyse(Task(name=path.stem, path=str(path), source=path.read_text()))
    groups = [s.group.id for s in analysis.steps if s.group is not None and s.group.covered]
    options = Options(arch="sm_90", levels={g: levels for g in groups} if levels else {})
    return assemble(analysis, options).source


def emulated_outputs(problem: Path, source: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(reference's outputs, the emulated program's outputs) on the harness's seeds."""
    try:
        namespace = load_program(source)
    except Unsupported as exc:
        pytest.skip(str(exc))
    reference: dict[str, Any] = runpy.run_path(str(problem))
    init = reference["get_init_inputs"]()
    torch.manual_seed(42)
    model = reference["Model"](*init)
    torch.manual_seed(42)
    ours = namespace["ModelNew"](*init)
    torch.manual_seed(1)
    inputs = reference["get_inputs"]()
    with torch.no_grad():
        expected = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        got = ours(*inputs)

    def flat(value: Any) -> list[torch.Tensor]:
        return list(value) if isinstance(value, (tuple, list)) else [value]

    return flat(expected), flat(got)
