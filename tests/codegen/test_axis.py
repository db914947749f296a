"""The AXIS family (argmax / argmin, max / min with indices, logsumexp, softmax over a non-last dim)
and prod on the CPU: classification, grouping, demotion, generated code, one nvcc build.

Numerics need a GPU (tests/gpu/test_axis_gpu.py); here the level-2 (all-PyTorch) programs run on
the CPU, which checks that demotion keeps the absorbed getitems before the ops that read them.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from support.demotion import assert_demoted_program_matches
from support.nvcc_build import NVCC, build_and_load

from codegen.emit.assemble import Options, assemble
from codegen.frontend.ops import AXIS, OTHER, REDUCTION, SOFTMAX
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import analyse
from graph.artifacts import Task
from tools.checks import static_findings, verdict

FIXTURES = Path(__file__).parents[1] / "fixtures" / "problems"
FAMILIES = FIXTURES / "level2" / "32_Axis_Families.py"
SUITE = Path(__file__).parents[2] / "evals" / "suite"

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x, n):
        return {body}


def get_inputs():
    return [torch.rand(3, 10, 6), torch.randint(0, 4, (3, 10, 6))]


def get_init_inputs():
    return []
"""
ANCHORS = ("argmax", "argmin", "max", "min", "amax", "logsumexp", "softmax", "log_softmax", "prod")


def task(body: str) -> Task:
    return Task(name="axis_case", path="axis_case.py", source=PROBLEM.format(body=body))


def anchor_specs(body: str) -> list[Any]:
    analysis = analyse(task(body))
    assert analysis.ok, analysis.trace_error
    return [s for s in analysis.specs if s.op in ANCHORS]


@pytest.mark.parametrize(
    ("body", "op", "dims", "keepdim", "values", "indices"),
    [
        ("torch.argmax(x, dim=1)", "argmax", [1], False, False, True),
        ("x.argmin(dim=-1, keepdim=True)", "argmin", [2], True, False, True),
        ("torch.argmax(x)", "argmax", [0, 1, 2], False, False, True),
        ("x.argmin()", "argmin", [0, 1, 2], False, False, True),
        ("torch.argmax(x, 0, True)", "argmax", [0], True, False, True),
        ("(lambda v: (v[0], v[1]))(torch.max(x, dim=1))", "argmax", [1], False, True, True),
        ("torch.min(x, 2, keepdim=True)[1]", "argmin", [2], True, False, True),
        ("torch.max(x, 0).indices", "argmax", [0], False, False, True),
        ("torch.min(x, 1).values", "argmin", [1], False, True, False),
        ("torch.logsumexp(x, dim=1)", "logsumexp", [1], False, True, False),
        ("x.logsumexp(-1, keepdim=True)", "logsumexp", [2], True, True, False),
        ("torch.logsumexp(x, dim=(2, 1))", "logsumexp", [1, 2], False, True, False),
        ("torch.special.logsumexp(x, 0)", "logsumexp", [0], False, True, False),
        ("torch.softmax(x, dim=1)", "softmax", [1], True, True, False),
        ("self.softmax(x)", "softmax", [1], True, True, False),
        ("F.log_softmax(x, 0)", "log_softmax", [0], True, True, False),
    ],
)
def test_axis_ops_are_classified_with_their_dims_and_outputs(
    body: str, op: str, dims: list[int], keepdim: bool, values: bool, indices: bool
) -> None:
    (spec,) = anchor_specs(body)
    assert (spec.family, spec.op, spec.args["dims"], spec.args["keepdim"]) == (AXIS, op, dims, keepdim)
    assert (spec.args["values"] is not None, spec.args.get("indices") is not None) == (values, indices)


@pytest.mark.parametrize(
    ("body", "family", "op"),
    [
        ("torch.softmax(x, dim=-1)", SOFTMAX, "softmax"),  # the last dim keeps its row kernels
        ("torch.max(x, 1)[0]", REDUCTION, "amax"),  # values only: a plain reduction
        ("torch.prod(x, 1)", REDUCTION, "prod"),
        ("x.prod(dim=0, keepdim=True)", REDUCTION, "prod"),
        ("torch.prod(x)", REDUCTION, "prod"),
    ],
)
def test_last_dim_softmax_max_values_and_prod_stay_in_their_families(body: str, family: str, op: str) -> None:
    (spec,) = anchor_specs(body)
    assert (spec.family, spec.op) == (family, op)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("torch.logsumexp(x, dim=(0, 2))", "non-adjacent"),
        ("torch.argmax(n, dim=1)", "float32"),
        ("torch.logsumexp(n.float() * 0 + x, dim=[])", "empty"),
        ("torch.max(n, 1)", "float32"),
    ],
)
def test_axis_ops_the_kernels_cannot_express_stay_pytorch(body: str, reason: str) -> None:
    specs = anchor_specs(body)
    assert specs and all(s.family == OTHER for s in specs)
    assert any(reason in s.reason for s in specs), [s.reason for s in specs]
    program = assemble(analyse(task(body)), Options())
    assert program.uncovered_ops, program.templates


def groups_of(body: str) -> list[Any]:
    analysis = analyse(task(body))
    return [s.group for s in analysis.steps if s.group is not None]


def test_max_with_indices_is_one_group_writing_values_and_indices() -> None:
    (group,) = groups_of("(lambda v: (v[0] * 2.0, v[1]))(torch.max(torch.tanh(x), dim=1))")
    assert group.kind == AXIS
    assert [s.op for s in group.specs] == ["tanh", "argmax", "mul"]
    values, indices = group.anchor.args["values"], group.anchor.args["indices"]
    assert group.absorbed == [indices, values]  # values last: the epilogue reads them
    assert set(group.outputs) == {indices, group.epilogue[-1].node}


def test_an_elementwise_chain_before_a_row_op_fuses_even_after_other_inputs() -> None:
    # The chain on `x` would be pulled next to its placeholder and closed by the chain on `n`.
    groups = groups_of("torch.logsumexp(x * 2.0 + 1.0, 1) + n.float().sum(), torch.softmax(x * 3.0, 0)")
    axis = [g for g in groups if g.kind == AXIS]
    assert [[s.op for s in g.specs] for g in axis] == [["mul", "add", "logsumexp"], ["mul", "softmax"]]


def test_a_reduction_never_returns_itself_for_a_prologue_result_needed_elsewhere() -> None:
    body = "(lambda t: (t.sum(1), t))(torch.tanh(x))"
    groups = groups_of(body)
    assert [g.kind for g in groups] == ["elementwise", REDUCTION]
    program = assemble(analyse(task(body)), Options())
    assert program.uncovered_ops == []


def test_softmax_with_a_saved_prologue_returns_the_saved_tensor() -> None:
    body = "(lambda t: (torch.softmax(t, 1), t + 1.0))(torch.exp(x))"
    (group, rest) = groups_of(body)
    assert group.kind == AXIS and group.save_prologue
    program = assemble(analyse(task(body)), Options())
    helper = program.source[program.source.index("def _g1") :].split("\n\n")[0]
    assert "saved = torch.empty(p_shape" in helper and "return saved, y" in helper, helper


@pytest.mark.parametrize(
    "body",
    [
        "(lambda v: (v[0] * 2.0, v[1]))(torch.max(torch.tanh(x), dim=1))",
        "torch.min(x * 3.0, 0).indices, torch.max(x, 2, keepdim=True).values - 1.0",
        "torch.logsumexp(torch.exp(x), dim=(1, 2)) * 2.0, torch.argmax(x + 1.0)",
        "torch.log_softmax(x * 2.0, dim=1) + 1.0, torch.prod(x, 1)",
    ],
)
def test_demoted_axis_groups_keep_their_absorbed_ops_in_graph_order(body: str) -> None:
    assert_demoted_program_matches(task(body), 2)


def test_split_axis_groups_are_written() -> None:
    body = "(lambda v: (v[0] * 2.0, v[1]))(torch.max(torch.tanh(x), dim=1))"
    (group,) = groups_of(body)
    program = assemble(analyse(task(body)), Options(levels={group.id: 1}))
    assert program.auto_demoted == [] and program.uncovered_ops == []
    assert sorted(program.templates.values()) == ["axis_argmax+values", "ew_vec4_split", "ew_vec4_split"]


def families_program() -> str:
    analysis = analyse(Task(name=FAMILIES.stem, path=str(FAMILIES), source=FAMILIES.read_text()))
    program = assemble(analysis, Options())
    assert program.uncovered_ops == [] and program.auto_demoted == []
    templates = sorted(program.templates.values())
    assert sum(t.startswith("axis_") for t in templates) == 9, templates
    assert "reduce_cols" in templates  # the product over a middle dim
    assert "axis_argmax+values+epilogue" in templates and "axis_logsumexp+prologue+epilogue" in templates
    return program.source


def test_axis_programs_never_call_back_into_pytorch_and_pass_the_hack_checks() -> None:
    source = families_program()
    called = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and getattr(func.value, "id", "") == "math":
                continue  # math.prod of shapes in the helpers
            called.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    banned = {"argmax", "argmin", "max", "min", "logsumexp", "softmax", "log_softmax", "prod", "tanh"}
    assert not called & banned, called & banned
    assert "int64" in source  # indices are allocated as PyTorch's dtype
    findings = static_findings(source)
    assert [f for f in findings if f["severity"] != "info"] == [], findings
    assert verdict(findings) == "clean"


SUITE_NAMES = ("Argmax", "Argmin", "LogSumExp", "Softmax_Channels", "Prod")


@pytest.mark.skipif(not SUITE.is_dir(), reason="evals/suite not present")
def test_every_suite_axis_problem_is_fully_covered() -> None:
    files = [p for p in sorted(SUITE.glob("level[12]/*.py")) if any(n in p.stem for n in SUITE_NAMES)]
    assert len(files) >= 3
    policy = OfflinePolicy()
    for path in files:
        plan = policy.plan(Task(name=path.stem, path=str(path), source=path.read_text()), None)
        kinds = {g.kind for g in plan.groups}
        assert kinds & {AXIS, REDUCTION} and "reference" not in kinds, (path.stem, plan.uncovered_ops)
        assert OTHER not in kinds


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_every_axis_variant_builds_with_nvcc(tmp_path: Path) -> None:
    program = tmp_path / "axis_solution.py"
    program.write_text(families_program())
    names = build_and_load(program, FAMILIES)
    # 9 AXIS groups, 8 launchers: the two plain argmin groups share one (shapes are run-time arguments).
    assert sum(n.startswith("axis_") for n in names) == 8, names
    assert sum(n.startswith("reduce_") for n in names) == 1, names
