"""Prompt rendering and plan reconciliation: the text the models see and the facts they cannot change."""

from __future__ import annotations

import pytest

from graph.artifacts import FusionGroup, OpInfo, Plan, Task, TensorSpec
from graph.context import Context
from nodes.llm import prompting
from nodes.llm.plan_merge import reconcile_plan

TASK = Task(name="gemm_relu", path="/p/gemm_relu.py", source="class Model: ...")
SPEC = TensorSpec(shape=[1024, 1024], dtype="float32")
OPS = [
    OpInfo(node="linear", op="linear", target="self.fc", output=SPEC, flops=2 * 1024**3, bytes=12 * 1024**2),
    OpInfo(node="relu", op="relu", target="torch.relu", output=SPEC, flops=1024**2, bytes=8 * 1024**2),
    OpInfo(
        node="softmax",
        op="softmax",
        target="torch.softmax",
        output=SPEC,
        flops=5 * 1024**2,
        bytes=8 * 1024**2,
    ),
]


def test_op_table_shows_flops_bytes_and_intensity() -> None:
    table = prompting.render_op_table(OPS)
    assert "| linear | linear | self.fc | float32[1024, 1024] | 2.15G | 12.6M | 170.67 |" in table
    assert "Total: 2.15G FLOPs, 29.4M bytes over 3 operators." in table
    assert "2 more operators" in prompting.render_op_table(OPS, limit=1)
    assert "could not be traced" in prompting.render_op_table([])


@pytest.mark.parametrize(
    ("arch", "flag"),
    [("sm_90", "-gencode=arch=compute_90,code=sm_90"), ("sm_90a", "-gencode=arch=compute_90a,code=sm_90a")],
)
def test_gencode_flag_follows_the_context_arch(arch: str, flag: str) -> None:
    assert prompting.gencode_flag(arch) == flag
    system = prompting.coder_write_messages(Context(gpu_arch=arch), TASK, Plan(task="t"), None)[0][1]
    assert flag in system


def test_fence_outlasts_backticks_inside_the_code_and_clip_keeps_both_ends() -> None:
    fenced = prompting.fence('doc = """```python\\nx\\n```"""', "python")
    assert fenced.startswith("````python\n") and fenced.endswith("\n````")
    clipped = prompting.clip("A" * 50 + "B" * 50, 20)
    assert clipped.startswith("A" * 10) and clipped.endswith("B" * 10) and "80 characters omitted" in clipped


def test_every_placeholder_must_be_filled() -> None:
    with pytest.raises(
        prompting.PromptTemplateError, match="planner_user.md: placeholder 'reference_source'"
    ):
        prompting.fill("planner_user.md", task_name="x")


def test_reconcile_takes_facts_from_the_trace_and_coverage_from_the_groups() -> None:
    model_plan = Plan(
        task="the model's own name",
        ops=[OpInfo(node="relu", op="relu", target="?", flops=1, bytes=1)],  # the model restating facts
        groups=[
            FusionGroup(
                id="g1", kind="gemm", nodes=["linear", "relu"], template="cublasLt + relu", covered=True
            ),
            FusionGroup(
                id="g2", kind="reference", nodes=["softmax", "dropout_7"], template="torch", covered=False
            ),
        ],
        covered_ops=["everything"],
        total_flops=5,
    )
    plan = reconcile_plan(model_plan, TASK, OPS, "ops from the test")
    assert plan.task == "gemm_relu"
    assert [op.node for op in plan.ops] == ["linear", "relu", "softmax"]
    assert [op.covered for op in plan.ops] == [True, True, False]
    assert plan.total_flops == sum(op.flops for op in OPS)
    assert plan.groups[0].bytes == 20 * 1024**2
    assert plan.covered_ops == ["linear", "relu"] and plan.uncovered_ops == ["softmax"]
    assert "groups name nodes the trace does not have: dropout_7" in plan.notes
    assert plan.traced


def test_reconcile_without_a_trace_keeps_the_model_plan_but_marks_it_untraced() -> None:
    model_plan = Plan(task="t", covered_ops=["relu", "relu"], total_flops=7)
    plan = reconcile_plan(model_plan, TASK, [], "no operator table")
    assert not plan.traced and plan.total_flops == 7 and plan.covered_ops == ["relu"]
