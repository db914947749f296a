"""The copy family and the masked / tensor-clamped elementwise ops on the CPU: classification,
grouping, demotion, generated code, one nvcc build.

Numerics need a GPU (tests/gpu/test_copy_gpu.py); here the level-2 (all-PyTorch) programs run on
the CPU, which checks that demotion re-emits the comparisons a masked fill absorbed.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from support.demotion import assert_demoted_program_matches
from support.nvcc_build import NVCC, build_and_load

from codegen.emit.assemble import Options, assemble
from codegen.emit.expressions import op_expr
from codegen.frontend.ops import COPY, ELEMENTWISE, OTHER
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import analyse
from graph.artifacts import Task
from tools.checks import static_findings, verdict

FIXTURES = Path(__file__).parents[1] / "fixtures" / "problems"
FAMILIES = FIXTURES / "level2" / "31_Copy_Families.py"
SUITE = Path(__file__).parents[2] / "evals" / "suite"

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("tri", torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8))
        self.drop = nn.Dropout(0.3)

    def forward(self, x, y, m):
        return {body}


def get_inputs():
    return [torch.rand(2, 6, 4, 8), torch.rand(2, 6, 4, 8), torch.rand(2, 6, 4, 8) > 0.5]


def get_init_inputs():
    return []
"""


def task(body: str) -> Task:
    return Task(name="copy_case", path="copy_case.py", source=PROBLEM.format(body=body))


def specs_of(body: str, ops: tuple[str, ...]) -> list[Any]:
    analysis = analyse(task(body))
    assert analysis.ok, analysis.trace_error
    return [s for s in analysis.specs if s.op in ops]


@pytest.mark.parametrize(
    ("body", "mode", "dim"),
    [
        ("torch.cat([x, y], dim=1)", "cat", 1),
        ("torch.cat((x, y, x), -1)", "cat", 3),
        ("torch.concat([x, y], 0)", "cat", 0),
        ("torch.stack([x, y], dim=1)", "stack", 1),
        ("torch.stack((x, y), -1)", "stack", 4),
    ],
)
def test_concatenations_are_copies_along_their_normalised_dim(body: str, mode: str, dim: int) -> None:
    (spec,) = specs_of(body, ("cat", "stack"))
    assert (spec.family, spec.args["mode"], spec.args["dim"]) == (COPY, mode, dim)
    assert len(spec.args["inputs"]) == body.count("x") + body.count("y")


@pytest.mark.parametrize(
    ("body", "op", "mode"),
    [
        ("x.transpose(1, 2).contiguous()", "contiguous", "contiguous"),
        ("x.clone()", "clone", "clone"),
        ("torch.clone(x.permute(0, 3, 1, 2))", "clone", "clone"),
        ("torch.tril(x, diagonal=-1)", "tril", "tril"),
        ("x.triu(2)", "triu", "triu"),
        ("torch.zeros_like(x)", "zeros_like", "fill"),
        ("torch.full_like(x, 0.25)", "full_like", "fill"),
        ("torch.nn.functional.pad(x, (1, 2, 3, 0), value=-1.0)", "pad", "pad"),
        ("torch.roll(x, shifts=(1, -2), dims=(0, 3))", "roll", "roll"),
        ("x.roll(3, 2)", "roll", "roll"),
    ],
)
def test_copies_fills_and_triangles_are_copy_ops(body: str, op: str, mode: str) -> None:
    (spec,) = specs_of(body, (op,))
    assert (spec.family, spec.args["mode"]) == (COPY, mode)


@pytest.mark.parametrize(
    ("body", "uncovered"),
    [
        ("torch.cat([x, m.float()], 1).to(torch.float64)", "to"),  # a dtype change stays PyTorch
        ("torch.cat([m, m], 1)", "cat"),  # bool parts
        ("x.contiguous(memory_format=torch.channels_last)", "contiguous"),
        ("x.masked_fill(m, 0.0)", "masked_fill"),  # a bool tensor mask: chains hold floats only
        ("x.masked_fill(y > 0.5, y[0, 0, 0, 0])", "masked_fill"),  # a tensor fill value
        ("self.drop(x)", "dropout"),  # training-mode dropout with p > 0 is random
        ("torch.zeros_like(x, dtype=torch.float64)", "zeros_like"),
        ("torch.nn.functional.pad(x, (1, 1, 2, 0), mode='reflect')", "pad"),  # only constant padding
        ("torch.roll(x, 5)", "roll"),  # a roll of the flattened tensor
    ],
)
def test_what_the_kernels_cannot_express_stays_pytorch(body: str, uncovered: str) -> None:
    program = assemble(analyse(task(body)), Options())
    assert uncovered in program.uncovered_ops, program.uncovered_ops


PAD = "torch.nn.functional.pad"


@pytest.mark.parametrize(
    ("body", "templates", "args"),
    [
        (  # Swin's shifted window: one pass
            f"{PAD}(torch.roll(x, (-1, -2), (1, 2)), (0, 0, 0, 1, 0, 2))",
            ["copy_roll_pad"],
            {"lo": [0, 0, 0, 0], "hi": [0, 2, 1, 0], "shift": [0, -1, -2, 0], "value": 0.0},
        ),
        (
            f"torch.roll({PAD}(x, (1, 1), value=2.0), 3, 3) * 2.0",
            ["copy_pad_roll+epilogue"],
            {"lo": [0, 0, 0, 1], "hi": [0, 0, 0, 1], "shift": [0, 0, 0, 3], "value": 2.0},
        ),
        ("torch.roll(torch.roll(x, 1, 2), (2, -1), (0, 2))", ["copy_roll"], {"lo": [2, 0, 0, 0]}),
        (f"{PAD}({PAD}(x, (1, 0)), (2, 3, 0, 1))", ["copy_pad"], {"lo": [0, 0, 0, 3], "hi": [0, 0, 1, 3]}),
        # not composed: different fill values, a crop, a roll read twice, a third window in a row
        (f"{PAD}({PAD}(x, (1, 0)), (2, 3), value=1.0)", ["copy_pad", "copy_pad"], {}),
        (f"{PAD}({PAD}(x, (1, 0)), (-1, 3))", ["copy_pad", "copy_pad"], {}),
        ("(r := torch.roll(x, 1, 2)), torch.roll(r, 1, 3)", ["copy_roll", "copy_roll"], {}),
        (f"torch.roll({PAD}(torch.roll(x, 1, 2), (0, 0, 1, 1)), -1, 2)", ["copy_roll_pad", "copy_roll"], {}),
    ],
)
def test_consecutive_pads_and_rolls_compose_into_one_window(
    body: str, templates: list[str], args: dict[str, Any]
) -> None:
    analysis = analyse(task(body))
    program = assemble(analysis, Options())
    assert program.uncovered_ops == []
    assert sorted(program.templates.values()) == sorted(templates)
    windows = [s for s in analysis.specs if s.args.get("lead")]
    if len(templates) == 1:
        (window,) = windows
        assert {k: window.args[k] for k in args} == args
        assert window.args["input"].name == "x"  # reads the first window's input itself
    assert_demoted_program_matches(task(body), 2)


def test_a_masked_fill_absorbs_its_comparison_and_fuses_into_the_softmax() -> None:
    body = "torch.softmax(torch.matmul(x, y.transpose(-1, -2)).masked_fill(self.tri[:, :, :4, :4] == 0, float('-inf')), -1)"
    analysis = analyse(task(body))
    (eq,) = [s for s in analysis.specs if s.op == "eq"]
    (fill,) = [s for s in analysis.specs if s.op == "masked_fill_cmp"]
    assert eq.family == fill.family == ELEMENTWISE and fill.args["lead"] == [eq.node]
    assert fill.args["params"] == {"cmp": "eq", "value": float("-inf")}
    groups = [s.group for s in analysis.steps if s.group is not None]
    assert [g.kind for g in groups] == ["gemm", "softmax"]
    assert [s.op for s in groups[1].prologue] == ["masked_fill_cmp"]
    assert all(eq.node not in g.members for g in groups)  # never materialised
    program = assemble(analysis, Options())
    assert program.uncovered_ops == [] and "== 0.0f) ? (-INFINITY) :" in program.cuda_src


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("torch.clamp(x, min=y)", {"has_min": True, "has_max": False}),
        ("x.clamp(y * 0.5, y)", {"has_min": True, "has_max": True}),
        ("torch.clamp(x, max=y[:, :1])", {"has_min": False, "has_max": True}),
    ],
)
def test_tensor_bounded_clamps_are_elementwise(body: str, expected: dict[str, bool]) -> None:
    (spec,) = specs_of(body, ("clamp_t",))
    assert spec.family == ELEMENTWISE and spec.args["params"] == expected
    assert len(spec.args["operands"]) == 1 + sum(expected.values())


def test_a_one_sided_numeric_clamp_is_elementwise() -> None:
    (spec,) = specs_of("torch.clamp(1 - x * y, min=0)", ("clamp",))
    assert spec.family == ELEMENTWISE, spec.reason


@pytest.mark.parametrize(
    "body",
    [
        "torch.softmax((x * 2.0).masked_fill(self.tri[:, :, :4, :] == 0, float('-inf')), -1)",
        "torch.relu(torch.cat([x * 2.0, y], 1))",
        "x.masked_fill(0.5 < y, -1.0) + 1.0",
    ],
)
def test_demoted_groups_keep_absorbed_comparisons_in_graph_order(body: str) -> None:
    assert_demoted_program_matches(task(body), 2)


def families_program() -> tuple[str, Any]:
    analysis = analyse(Task(name=FAMILIES.stem, path=str(FAMILIES), source=FAMILIES.read_text()))
    program = assemble(analysis, Options())
    assert program.uncovered_ops == [] and program.auto_demoted == []
    kinds = sorted(t for t in program.templates.values() if t.startswith("copy_"))
    expected = ["cat", "cat", "cat", "cat+epilogue", "clone+epilogue", "contiguous", "contiguous"]
    expected += ["fill", "fill+epilogue", "pad", "pad+epilogue", "pad_roll+epilogue", "roll", "roll+epilogue"]
    expected += ["roll_pad", "stack", "stack"]
    expected += ["tril", "triu+epilogue"]
    assert kinds == [f"copy_{k}" for k in expected]
    return program.source, program


def test_copy_programs_never_call_back_into_pytorch_and_pass_the_hack_checks() -> None:
    source, program = families_program()
    called = set()
    runs = [f for f in ast.walk(ast.parse(source)) if isinstance(f, ast.FunctionDef)]
    runs = [f for f in runs if f.name == "forward" or f.name.startswith("_g")]  # not __init__'s buffer
    assert len(runs) > 10
    for node in (n for f in runs for n in ast.walk(f)):
        if isinstance(node, ast.Call):
            func = node.func
            called.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    banned = {"cat", "concat", "stack", "clone", "tril", "triu", "zeros_like", "full_like", "masked_fill"}
    banned |= {"pad", "roll"}
    assert not called & (banned | {"eq", "clamp", "softmax"}), called & banned
    findings = static_findings(source)
    assert [f for f in findings if f["severity"] != "info"] == [], findings
    assert verdict(findings) == "clean"
    assert program.launches == len(program.templates) + 1  # one launch per group, two for 70 parts


def test_a_contiguous_input_is_returned_as_is_and_clone_always_copies() -> None:
    source, _ = families_program()
    assert "y = x if x.is_contiguous() else torch.empty(" in source
    assert "if not x.is_contiguous():" in source
    assert source.count("if not x.is_contiguous():") == 1  # not for clone


@pytest.mark.skipif(not SUITE.is_dir(), reason="evals/suite not present")
def test_every_suite_copy_problem_is_fully_covered() -> None:
    names = ("Concat", "Tril", "Shuffle", "Dense", "Inception", "MiniGPT", "CausalMask")
    files = [p for p in sorted(SUITE.glob("level[123]/*.py")) if any(n in p.stem for n in names)]
    assert len(files) >= 8
    policy = OfflinePolicy()
    for path in files:
        plan = policy.plan(Task(name=path.stem, path=str(path), source=path.read_text()), None)
        kinds = {g.kind for g in plan.groups}
        assert "reference" not in kinds and OTHER not in kinds, (path.stem, plan.uncovered_ops)


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_every_copy_variant_builds_with_nvcc(tmp_path: Path) -> None:
    program = tmp_path / "copy_solution.py"
    program.write_text(families_program()[0])
    prefixes = ("cat_", "stack_", "contiguous_", "clone_", "tril_", "triu_", "fill_", "pad_", "roll_")
    launchers = [n for n in build_and_load(program, FAMILIES) if n.startswith(prefixes)]
    assert len(launchers) >= 13, launchers
    assert any(n.startswith("pad_") for n in launchers) and any(n.startswith("roll_") for n in launchers)


def test_a_long_concatenation_takes_one_launch_per_64_parts() -> None:
    body = "torch.stack([x[:, i % 6] for i in range(130)], 1)"
    analysis = analyse(task(body))
    (stack,) = [s for s in analysis.specs if s.op == "stack"]
    assert stack.family == COPY and len(stack.args["inputs"]) == 130
    program = assemble(analysis, Options())
    assert program.uncovered_ops == [] and program.launches == 3
    assert "StitchConcatParts<64>" in program.cuda_src and "StitchConcatParts<2>" in program.cuda_src
    assert "x64.shape" not in program.source  # stacked parts have size 1: the second launch starts at 64
    assert ", 64, y.data_ptr()" in program.source


@pytest.mark.parametrize(
    ("body", "is_view"),
    [
        ("x.to(y.device) + 1.0", True),
        ("x.to(torch.float32) * 2.0", True),
        ("x.float() - y", True),
        ("x.to(torch.float64).sum()", False),  # a real conversion stays PyTorch
    ],
)
def test_conversions_that_change_nothing_are_views(body: str, is_view: bool) -> None:
    program = assemble(analyse(task(body)), Options())
    assert ("to" not in program.uncovered_ops) is is_view, program.uncovered_ops


def test_tensor_constants_are_folded_into_their_elementwise_users() -> None:
    body = "torch.min(x, torch.tensor(0.25, device=x.device)) * torch.tensor(-2.0, device=y.device)"
    analysis = analyse(task(body))
    folded = [s for s in analysis.specs if s.op == "tensor"]
    assert len(folded) == 2 and all(s.family == ELEMENTWISE for s in folded)
    users = [s for s in analysis.specs if s.op in ("minimum", "mul")]
    assert [u.args["operands"][1] for u in users] == [0.25, -2.0]
    program = assemble(analysis, Options())
    assert program.uncovered_ops == [] and "torch.tensor(" not in program.source.split("class ModelNew")[1]
    assert "stitch_min(x_f0, 0.25f)" in program.cuda_src


def test_demoted_groups_recreate_folded_tensor_constants() -> None:
    assert_demoted_program_matches(task("torch.min(x, torch.tensor(0.25, device=x.device)) + y"), 2)


# The kernels of templates/layout.cuh compiled as plain C++ with one loop per block and thread, so the
# index math (strided offsets, 32- and 64-bit paths, triangle tests, concat slices) runs on the CPU.


@pytest.mark.parametrize(
    ("mask", "lower", "diagonal", "invert"),
    [
        ("~torch.tril(torch.ones(4, 8, dtype=torch.bool, device=x.device))", True, 0, True),
        ("torch.ones(4, 8, dtype=torch.bool, device=x.device).triu(2)", False, 2, False),
        (
            "torch.tril(torch.ones((4, 8), dtype=torch.bool, device=x.device), diagonal=-1).logical_not()",
            True,
            -1,
            True,
        ),
    ],
)
def test_a_triangle_of_ones_is_computed_in_registers(
    mask: str, lower: bool, diagonal: int, invert: bool
) -> None:
    analysis = analyse(task(f"torch.relu(x).masked_fill({mask}, -2.5)"))
    (fill,) = [s for s in analysis.specs if s.op == "masked_fill_tri"]
    assert fill.family == "elementwise" and fill.args["operands"][0].name == "relu"
    expected = {"rows": 4, "cols": 8, "diagonal": diagonal, "lower": lower, "invert": invert, "value": -2.5}
    assert fill.args["params"] == expected
    pieces = [s for s in analysis.specs if s.node in fill.args["lead"]]
    assert [s.args.get("absorbed") for s in pieces] == [True] * (3 if invert else 2)
    program = assemble(analysis, Options())
    assert program.uncovered_ops == [] and "masked_fill_tri" in program.covered_ops
    forward = program.source.split("def forward")[1]
    assert "ones(" not in forward and "tril(" not in forward  # the mask is never made


def test_a_triangle_mask_read_elsewhere_stays_pytorch() -> None:
    body = "x.masked_fill(m2 := torch.ones(4, 8, dtype=torch.bool, device=x.device).tril(), 0.0), m2.float()"
    program = assemble(analyse(task(body)), Options())
    assert "masked_fill" in program.uncovered_ops


@pytest.mark.parametrize(
    ("lower", "diagonal", "invert"), [(True, 0, True), (False, 2, False), (True, -1, False)]
)
def test_the_triangle_expression_matches_masked_fill(
    tmp_path: Path, lower: bool, diagonal: int, invert: bool
) -> None:
    """The C expression (compiled with g++) over every element of a (2, 3, 5, 7) tensor."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    params = {"rows": 5, "cols": 7, "diagonal": diagonal, "lower": lower, "invert": invert, "value": -2.5}
    expr = op_expr("masked_fill_tri", ["x"], params, [None])
    source = "#include <cmath>\n#include <cstdint>\n#include <cstdio>\nint main() {\n"
    source += f'  for (int64_t ei = 0; ei < 210; ++ei) {{ const float x = (float)ei; printf("%.1f\\n", {expr}); }}\n}}\n'
    (tmp_path / "tri.cpp").write_text(source)
    subprocess.run([compiler, "-O1", str(tmp_path / "tri.cpp"), "-o", str(tmp_path / "tri")], check=True)
    out = subprocess.run([str(tmp_path / "tri")], check=True, capture_output=True, text=True).stdout
    got = torch.tensor([float(v) for v in out.split()]).view(2, 3, 5, 7)
    ones = torch.ones(5, 7, dtype=torch.bool)
    mask = torch.tril(ones, diagonal) if lower else torch.triu(ones, diagonal)
    expected = (
        torch.arange(210, dtype=torch.float32).view(2, 3, 5, 7).masked_fill(~mask if invert else mask, -2.5)
    )
    assert torch.equal(got, expected)
