"""The scan family on the CPU: classification, grouping, demotion, generated code, one nvcc build.

Numerics need a GPU (tests/gpu/test_scan_gpu.py); here the level-2 (all-PyTorch) programs run on
the CPU, which checks that demotion keeps the absorbed flips and masks in graph order.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from support.demotion import assert_demoted_program_matches
from support.nvcc_build import NVCC, build_and_load

from codegen.emit.assemble import Options, assemble
from codegen.frontend.ops import OTHER, SCAN
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import analyse
from graph.artifacts import Task
from tools.checks import static_findings, verdict

FIXTURES = Path(__file__).parents[1] / "fixtures" / "problems"
FAMILIES = FIXTURES / "level2" / "30_Scan_Families.py"
SUITE = Path(__file__).parents[2] / "evals" / "suite"

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, m):
        return {body}


def get_inputs():
    return [torch.rand(3, 10, 6), torch.rand(3, 10, 6) > 0.5]


def get_init_inputs():
    return []
"""


def task(body: str) -> Task:
    return Task(name="scan_case", path="scan_case.py", source=PROBLEM.format(body=body))


def scan_specs(body: str) -> list[Any]:
    analysis = analyse(task(body))
    assert analysis.ok, analysis.trace_error
    return [s for s in analysis.specs if s.op in ("cumsum", "cumprod")]


@pytest.mark.parametrize(
    ("body", "op", "dim", "reverse", "masked"),
    [
        ("torch.cumsum(x, dim=1)", "cumsum", 1, False, False),
        ("x.cumsum(-1)", "cumsum", 2, False, False),
        ("torch.cumprod(x, 0)", "cumprod", 0, False, False),
        ("x.cumprod(dim=2)", "cumprod", 2, False, False),
        ("torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])", "cumsum", 1, True, False),
        ("x.flip(2).cumprod(2).flip(2)", "cumprod", 2, True, False),
        ("torch.cumsum(x * m, dim=1)", "cumsum", 1, False, True),
        ("torch.cumsum((m * x).flip(1), 1).flip(1)", "cumsum", 1, True, True),
    ],
)
def test_scans_are_classified_with_their_dim_direction_and_mask(
    body: str, op: str, dim: int, reverse: bool, masked: bool
) -> None:
    (spec,) = scan_specs(body)
    assert (spec.family, spec.op, spec.args["dim"]) == (SCAN, op, dim)
    assert spec.args["reverse"] is reverse
    assert (spec.args["mask"] is not None) is masked
    assert len(spec.args["lead"]) == int(reverse) + int(masked)
    assert len(spec.args["trail"]) == int(reverse)


@pytest.mark.parametrize(
    ("body", "uncovered"),
    [
        ("torch.cumsum(x, dim=1, dtype=torch.float64)", "cumsum"),  # a dtype: PyTorch keeps it
        ("torch.cumsum(x.flip(2), 1).flip(2)", "flip"),  # flips over another dim are real copies
        ("torch.cumsum(x.flip(1), 1)", "flip"),  # one flip alone is a copy too
    ],
)
def test_scans_the_kernel_cannot_express_stay_pytorch(body: str, uncovered: str) -> None:
    program = assemble(analyse(task(body)), Options())
    assert uncovered in program.uncovered_ops, program.uncovered_ops


def test_a_reverse_scan_is_one_group_with_its_prologue_and_epilogue() -> None:
    analysis = analyse(task("torch.cumsum(torch.tanh(x * 2.0).flip(1), 1).flip(1) - x"))
    (group,) = [s.group for s in analysis.steps if s.group is not None]
    assert group.kind == SCAN
    assert [s.op for s in group.specs] == ["mul", "tanh", "flip", "cumsum", "flip", "sub"]
    assert group.tail is group.epilogue[-1].node


@pytest.mark.parametrize(
    "body",
    [
        "torch.cumsum(torch.tanh(x).flip(1), 1).flip(1) * 3.0",
        "torch.cumsum(x * m, dim=2) - x",
        "torch.cumprod((x * m).flip(0), 0).flip(0) + 1.0",
    ],
)
def test_demoted_scan_groups_keep_their_absorbed_ops_in_graph_order(body: str) -> None:
    assert_demoted_program_matches(task(body), 2)


def test_split_scan_groups_are_written() -> None:
    analysis = analyse(task("torch.cumsum(torch.exp(x).flip(1), 1).flip(1) * 3.0"))
    (group,) = [s.group for s in analysis.steps if s.group is not None]
    program = assemble(analysis, Options(levels={group.id: 1}))
    assert program.auto_demoted == [] and program.uncovered_ops == []
    assert sorted(program.templates.values()) == ["ew_vec4_split", "ew_vec4_split", "scan_reverse"]


def families_program() -> str:
    analysis = analyse(Task(name=FAMILIES.stem, path=str(FAMILIES), source=FAMILIES.read_text()))
    program = assemble(analysis, Options())
    assert program.uncovered_ops == [] and program.auto_demoted == []
    assert sum(t.startswith("scan") for t in program.templates.values()) == 8
    return program.source


def test_scan_programs_never_call_back_into_pytorch_and_pass_the_hack_checks() -> None:
    source = families_program()
    called = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            called.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    assert not called & {"cumsum", "cumprod", "flip", "mul", "sub", "tanh"}, called
    findings = static_findings(source)
    assert [f for f in findings if f["severity"] != "info"] == [], findings
    assert verdict(findings) == "clean"


@pytest.mark.skipif(not SUITE.is_dir(), reason="evals/suite not present")
def test_every_suite_scan_problem_is_fully_covered() -> None:
    names = ("Cumsum", "Cumprod")
    files = [p for p in sorted(SUITE.glob("level[12]/*.py")) if any(n in p.stem for n in names)]
    assert len(files) >= 9
    policy = OfflinePolicy()
    for path in files:
        plan = policy.plan(Task(name=path.stem, path=str(path), source=path.read_text()), None)
        kinds = {g.kind for g in plan.groups}
        assert SCAN in kinds and "reference" not in kinds, (path.stem, plan.uncovered_ops)
        assert OTHER not in kinds


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_every_scan_variant_builds_with_nvcc(tmp_path: Path) -> None:
    program = tmp_path / "scan_solution.py"
    program.write_text(families_program())
    names = build_and_load(program, FAMILIES)
    assert sum(n.startswith("scan_") for n in names) == 7, names  # eight groups, two alike
