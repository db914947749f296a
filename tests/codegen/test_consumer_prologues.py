"""Elementwise chains applied on load by the op that reads them (schedule/fusion.py): a pool or a
group norm takes the chain before it as its prologue, and a conv whose epilogue would be a pass of
its own hands that epilogue, bias included, to its reader (a pool, a group norm or a row kernel), so
the conv output is not written twice.

Numerics of the kernels need a GPU (tests/gpu/test_pool_gpu.py runs the `pool` fixture); here: the
grouping, the code each side writes, demotion undoing the bias move, the all-PyTorch programs on
the CPU and one nvcc build.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.demotion import assert_demoted_program_matches
from support.nvcc_build import NVCC, build_and_load

from codegen.emit.assemble import Options, assemble
from codegen.schedule.plan import analyse
from graph.artifacts import Task

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3{bias})
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.rand(2, 3, 17, 16)]


def get_init_inputs():
    return []
"""

CONV_POOL = "torch.tanh(self.pool(F.hardswish(self.conv(x) - 0.5)))"
GN = "F.group_norm(torch.sigmoid(self.conv(x) * 2.0), 4) + 1.0"


def task(body: str, bias: bool = True) -> Task:
    source = PROBLEM.format(body=body, bias="" if bias else ", bias=False")
    return Task(name="prologue_case", path="prologue_case.py", source=source)


def helper_text(source: str, name: str) -> str:
    start = source.index(f"def {name}(")
    return source[start : source.index("\n\n\n", start)]


@pytest.mark.parametrize(
    ("body", "bias", "templates"),
    [
        (CONV_POOL, True, ["cudnn_conv", "pool_max+prologue+epilogue"]),
        (CONV_POOL, False, ["cudnn_conv", "pool_max+prologue+epilogue"]),
        ("F.avg_pool2d(x * 2.0 + 1.0, 3, padding=1)", True, ["pool_avg+prologue"]),
        # the launcher folds bias + ReLU itself: nothing to move
        ("self.pool(torch.relu(self.conv(x)))", True, ["cudnn_conv+bias_act", "pool_max"]),
        # the epilogue's result, or the conv's own, has another reader: written once, as before
        ("(y := self.conv(x) * 2.0), self.pool(y)", True, ["cudnn_conv+ew_epilogue", "pool_max"]),
        ("(c := self.conv(x)), self.pool(c * 2.0)", True, ["cudnn_conv+ew_epilogue", "pool_max"]),
        # a row kernel or a group norm reading a conv's epilogue takes it the same way
        ("(F.gelu(self.conv(x)) * 0.5).sum(dim=1)", True, ["cudnn_conv", "reduce_cols+prologue"]),
        (GN, True, ["cudnn_conv", "gn_fused_prologue_epilogue"]),
        ("F.instance_norm(torch.tanh(x) * 2.0)", True, ["gn_fused_prologue"]),
    ],
)
def test_readers_apply_the_chain_before_them_on_load(body: str, bias: bool, templates: list[str]) -> None:
    program = assemble(analyse(task(body, bias)), Options())
    assert program.uncovered_ops == []
    assert list(program.templates.values()) == templates


def test_the_conv_leaves_its_bias_to_the_pool() -> None:
    program = assemble(analyse(task(CONV_POOL)), Options())
    conv, pool = helper_text(program.source, "_g1"), helper_text(program.source, "_g2")
    assert "_stitch_conv(a0, a1, None, None," in conv  # no bias, no epilogue kernel
    assert "_ext." not in conv
    assert "bias_c = a0.view(-1, 1, 1)" in pool and "_stitch_bc(bias_c, p_shape)" in pool
    assert "self.conv.bias, conv" in program.source  # the forward passes the bias to the pool
    assert "StitchInput pro" not in program.cuda_src.split("// group g2")[1]


@pytest.mark.parametrize(("levels", "conv_bias"), [({"g2": 1}, True), ({"g2": 2}, True), ({"g1": 2}, False)])
def test_demoting_either_group_gives_the_bias_back_to_the_conv(
    levels: dict[str, int], conv_bias: bool
) -> None:
    program = assemble(analyse(task(CONV_POOL)), Options(levels=levels))
    source = program.source
    assert "bias_c" not in helper_text(source, "_g2") if levels.get("g2", 0) == 0 else True
    if conv_bias:  # our conv adds it again, through its launcher or its own epilogue kernel
        assert "_stitch_conv(a0, a1, a2," in helper_text(source, "_g1")
    else:  # PyTorch's conv adds it
        assert "self.conv(x)  # g1: PyTorch" in source


@pytest.mark.parametrize("body", [CONV_POOL, GN])
@pytest.mark.parametrize("bias", [True, False])
def test_the_all_pytorch_program_still_matches(body: str, bias: bool) -> None:
    assert_demoted_program_matches(task(body, bias), 2)


def test_the_group_norm_loads_through_the_prologue() -> None:
    program = assemble(analyse(task(GN)), Options())
    norm = helper_text(program.source, "_g2")
    assert norm.count("_ext.gn_norm_") == 1  # one call: one pass, or statistics and apply
    assert norm.count("_stitch_bc(bias_c,") == 1  # the one load functor adds the conv's bias
    assert "stitch_gn_run(pro, epi," in program.cuda_src


def test_the_tf32_matched_forward_names_its_own_pool_helper() -> None:
    """The TF32-matched body keeps cuDNN's conv as PyTorch's, bias and all, so its pool helper
    differs from the strict body's and gets a name of its own."""
    program = assemble(analyse(task(CONV_POOL)), Options())
    source = program.source
    assert "def _g2(" in source and "def _g2_alt(" in source
    strict, matched = source.split("def _stitch_forward_tf32")
    assert "_g2(self.conv.bias, conv," in strict and "_g2_alt(conv," in matched


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_a_pool_with_a_conv_prologue_builds_with_nvcc(tmp_path: Path) -> None:
    problem = tmp_path / "prologue_case.py"
    problem.write_text(task(CONV_POOL).source)
    program = tmp_path / "prologue_solution.py"
    program.write_text(assemble(analyse(task(CONV_POOL)), Options()).source)
    launchers = build_and_load(program, problem)
    assert "conv" in launchers and sum(n.startswith("pool_") for n in launchers) == 2
    problem.write_text(task(GN).source)
    program.write_text(assemble(analyse(task(GN)), Options()).source)
    launchers = build_and_load(program, problem)
    assert sum(n.startswith("gn_norm_") for n in launchers) == 2  # the strict and TF32-matched bodies
