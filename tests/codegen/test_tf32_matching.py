"""With cuDNN TF32 allowed, programs compute every group that feeds a convolution as the reference does.

Why (codegen/schedule/precision.py, docs/kernelbench.md §5): under KernelBench's defaults a deep
CNN's output is chaotic at the 1e-4 tolerance, so nothing before a TF32 convolution may differ from
eager by even one ulp. These tests read the generated programs (no GPU): the TF32 forward exists
exactly when a covered group feeds a convolution and keeps those groups as the reference's own
calls; tests/gpu/test_kernelbench_gpu.py checks the numbers.
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_codegen_program import task_for

from codegen.emit.assemble import Options, assemble
from codegen.schedule.fusion import REFERENCE
from codegen.schedule.plan import analyse
from codegen.schedule.precision import tf32_feeding_nodes, tf32_matched_levels
from graph.artifacts import Task

SUITE = Path(__file__).parents[2] / "evals" / "suite"


def method_source(program: str, name: str) -> str:
    tree = ast.parse(program)
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    method = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(program, method) or ""


def test_no_convolution_means_no_tf32_forward() -> None:
    analysis = analyse(task_for("level1/1_ReLU.py"))
    assert tf32_matched_levels(analysis.steps, {}) is None
    assert "_stitch_forward_tf32" not in assemble(analysis, Options()).source


def test_groups_feeding_a_convolution_are_demoted_and_the_rest_kept() -> None:
    analysis = analyse(task_for("level3/3_ResNet_BasicBlock.py"))
    levels = tf32_matched_levels(analysis.steps, {})
    assert levels is not None
    feeding = tf32_feeding_nodes(analysis.steps)
    covered = [s.group for s in analysis.steps if s.group is not None and s.group.kind != REFERENCE]
    demoted = {g.id for g in covered if any(spec.node in feeding for spec in g.specs)}
    kept = {g.id for g in covered} - demoted
    assert demoted and kept, "a basic block has ours before the second conv and after it"
    assert {gid for gid, level in levels.items() if level >= 2} == demoted

    source = assemble(analysis, Options()).source
    tf32 = method_source(source, "_stitch_forward_tf32")
    fast = method_source(source, "forward")
    assert "if torch.backends.cudnn.allow_tf32:" in fast
    for gid in demoted:
        assert f"# {gid}: PyTorch" in tf32 and f"# {gid}: PyTorch" not in fast
    for gid in kept:
        assert f"  # {gid}\n" in tf32 + "\n"


def _suite_task(relative: str) -> Task:
    path = SUITE / relative
    return Task(name=path.stem, path=str(path), source=path.read_text())


def test_a_depthwise_convolution_is_no_tf32_op_but_one_feeding_a_convolution_is_matched() -> None:
    # PyTorch runs a 2-D depthwise convolution with its own fp32 kernel whatever the TF32 flag, and ours
    # sums in its order: alone (nothing after it rounds to TF32) it stays ours with TF32 allowed ...
    alone = analyse(_suite_task("level1/16_Conv2d_Depthwise.py"))
    assert tf32_matched_levels(alone.steps, {}) is None
    assert "_stitch_forward_tf32" not in assemble(alone, Options()).source
    # ... while before a pointwise convolution (which does round to TF32) it feeds one and is matched.
    separable = analyse(_suite_task("level2/16_Conv2d_DepthwiseSeparable_ReLU6.py"))
    levels = tf32_matched_levels(separable.steps, {})
    assert levels is not None
    depthwise = next(
        s.group
        for s in separable.steps
        if s.group is not None and any(sp.args.get("depthwise") for sp in s.group.specs)
    )
    assert levels[depthwise.id] >= 2
