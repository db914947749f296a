"""Plans of the offline policy for the suite's problem shapes (small copies in tests/fixtures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codegen.advice import CUDA_GRAPH_ADVICE
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import LAUNCH_US, analyse, build_plan, speed_of_light_ms
from graph.artifacts import Feedback, Plan, Profile, Task

FIXTURES = Path(__file__).parents[1] / "fixtures" / "problems"
SUITE = Path(__file__).parents[2] / "evals" / "suite"


def task_for(relative: str) -> Task:
    path = FIXTURES / relative
    return Task(name=path.stem, path=str(path), source=path.read_text(), level=path.parent.name)


def plan_for(relative: str) -> Plan:
    return OfflinePolicy().plan(task_for(relative), None)


def kinds(plan: Plan) -> list[str]:
    return [g.kind for g in plan.groups]


# (fixture, expected group kinds in order, expected uncovered op kinds)
EXPECTED = [
    ("level1/1_ReLU.py", ["elementwise"], []),
    ("level1/2_GELU.py", ["elementwise"], []),
    ("level1/3_SiLU.py", ["elementwise"], []),
    ("level1/4_Softmax.py", ["softmax"], []),
    ("level1/5_LayerNorm.py", ["layer_norm"], []),
    ("level1/6_Sum_last_dim.py", ["reduction"], []),
    ("level1/7_Max_over_dim.py", ["reduction"], []),
    ("level1/8_Square_matmul.py", ["gemm"], []),
    ("level1/9_Conv2d.py", ["conv"], []),
    ("level1/10_MaxPool2d.py", ["pool"], []),
    ("level2/1_Linear_ReLU.py", ["gemm"], []),
    ("level2/2_Linear_GELU_Scale.py", ["gemm"], []),
    ("level2/3_Matmul_Scale_Softmax.py", ["gemm", "softmax"], []),
    ("level2/4_Conv_BN_ReLU.py", ["conv", "batch_norm"], []),
    ("level2/5_Residual_LayerNorm.py", ["layer_norm"], []),
    ("level2/6_Elementwise_Chain.py", ["elementwise"], []),
    ("level2/7_Linear_Sigmoid_Sum.py", ["gemm", "reduction"], []),
    ("level2/8_BMM_Softmax.py", ["gemm", "softmax"], []),
    ("level3/1_MLP.py", ["gemm", "gemm", "gemm"], []),
    (
        "level3/2_CNN_Stage.py",
        ["conv", "batch_norm", "conv", "batch_norm", "pool"],
        [],
    ),
    ("level3/6_Transformer_MLP.py", ["layer_norm", "gemm", "gemm"], []),
]


@pytest.mark.parametrize(("fixture", "expected_kinds", "uncovered"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_plan_groups_and_coverage(fixture: str, expected_kinds: list[str], uncovered: list[str]) -> None:
    plan = plan_for(fixture)
    assert plan.traced
    assert kinds(plan) == expected_kinds
    assert plan.uncovered_ops == uncovered
    assert [s.groups for s in plan.subtasks] == [[g.id] for g in plan.groups]
    for group in plan.groups:
        assert group.covered == (group.kind != "reference")
        assert group.template
        if not group.covered:
            assert group.reason, "an uncovered group says why"


def test_matmul_flops_and_bytes() -> None:
    plan = plan_for("level1/8_Square_matmul.py")
    n = 256
    (op,) = plan.ops
    assert op.op == "matmul"
    assert op.flops == 2 * n**3
    assert op.bytes == 3 * n * n * 4
    assert plan.total_flops == 2 * n**3 and plan.total_bytes == 3 * n * n * 4


def test_linear_relu_folds_into_cublaslt_epilogue() -> None:
    plan = plan_for("level2/1_Linear_ReLU.py")
    (group,) = plan.groups
    assert group.template == "cublaslt_fused" and len(group.nodes) == 2
    assert plan.covered_ops == ["linear", "relu"]
    assert plan.ops[0].flops == 2 * 32 * 60 * 100 + 32 * 60


def test_gelu_needs_our_epilogue_kernel() -> None:
    # cuBLASLt's GELU epilogue is the tanh approximation: exact GELU stays in our kernel.
    (group,) = plan_for("level2/2_Linear_GELU_Scale.py").groups
    assert group.template == "cublaslt_fused+ew_epilogue"


def test_sigmoid_moves_into_the_reduction_prologue() -> None:
    plan = plan_for("level2/7_Linear_Sigmoid_Sum.py")
    gemm, reduction = plan.groups
    assert gemm.nodes == ["linear"]
    assert reduction.nodes[:2] == ["sigmoid", "sum_1"]


def test_residual_add_becomes_layernorm_prologue() -> None:
    (group,) = plan_for("level2/5_Residual_LayerNorm.py").groups
    assert group.kind == "layer_norm" and group.nodes == ["add", "norm"]


def test_resnet_block_fuses_residual_and_relu_into_batchnorm() -> None:
    plan = plan_for("level3/3_ResNet_BasicBlock.py")
    assert kinds(plan).count("batch_norm") == 3
    last = plan.groups[-1]
    assert last.kind == "batch_norm" and last.nodes == ["downsample_1", "add", "relu_1"]


def test_hand_written_attention_is_one_fused_op() -> None:
    """matmul, divide, softmax, matmul (attention_chain.py): one attention group, no softmax, no GEMM
    for the scores; the head merge is our strided gather."""
    plan = plan_for("level3/4_Attention_Block.py")
    assert kinds(plan) == ["gemm", "gemm", "gemm", "attention", "copy", "gemm"]
    assert plan.uncovered_ops == []


def test_attention_scale_folds_into_gemm_alpha() -> None:
    """Scores read twice stay written out: their scale is the GEMM's alpha, the softmax its own group."""
    task = task_for("level3/4_Attention_Block.py")
    task.source = task.source.replace("return self.out_proj(out)", "return self.out_proj(out), scores")
    plan = OfflinePolicy().plan(task, None)
    assert "softmax" in kinds(plan) and "attention" not in kinds(plan)
    scores = next(g for g in plan.groups if "truediv" in g.nodes)
    assert scores.kind == "gemm" and scores.template == "cublaslt_fused"
    assert plan.uncovered_ops == [] and "copy" in kinds(plan)  # the head merge: our strided gather


def test_rnn_loop_traces_with_concrete_sizes() -> None:
    plan = plan_for("level3/5_Elman_RNN.py")
    assert plan.traced
    assert "concrete sizes" in plan.notes
    assert kinds(plan).count("gemm") == 12  # 6 steps x (input GEMM, hidden GEMM + add + tanh)
    assert plan.host.cuda_graph, "many small launches: a CUDA graph pays"


def test_untraceable_forward_gives_an_untraced_plan() -> None:
    source = (
        (FIXTURES / "level1/1_ReLU.py")
        .read_text()
        .replace("return torch.relu(x)", "return torch.relu(x) if x.sum() > 0 else x")
    )
    task = Task(name="data_dependent", path="<memory>", source=source)
    plan = OfflinePolicy().plan(task, None)
    assert not plan.traced
    assert [g.kind for g in plan.groups] == ["reference"] and plan.uncovered_ops == ["forward"]
    assert "could not trace" in plan.notes


def test_reference_profile_marks_launch_bound_models() -> None:
    task = task_for("level2/6_Elementwise_Chain.py")
    quiet = build_plan(task, analyse(task), None)
    busy = Profile(source="torch_profiler", device_ms=0.02, kernel_count=12, own_kernel_share=0.0)
    assert not quiet.host.cuda_graph
    assert build_plan(task, analyse(task), busy).host.cuda_graph


def test_speed_of_light_uses_the_h200_ceilings() -> None:
    assert speed_of_light_ms(51_000_000_000, 0) == pytest.approx(1.0)
    assert speed_of_light_ms(0, 4_300_000_000) == pytest.approx(1.0)


# The real suite (evals/suite): every problem traces, and the ops the offline templates cover are
# covered; pooling and stack stay PyTorch.
SUITE_KINDS = {
    "level1/1_ReLU": ["elementwise"],
    "level1/2_GELU": ["elementwise"],
    "level1/3_SiLU": ["elementwise"],
    "level1/4_Softmax": ["softmax"],
    "level1/5_LayerNorm": ["layer_norm"],
    "level1/6_SumReduction": ["reduction"],
    "level1/7_MaxReduction": ["reduction"],
    "level1/8_Matmul": ["gemm"],
    "level1/9_Conv2d": ["conv"],
    "level1/10_MaxPool2d": ["pool"],
    "level2/1_Gemm_Bias_ReLU": ["gemm"],
    "level2/2_Gemm_GELU_Scale": ["gemm"],
    "level2/3_Matmul_Scale_Softmax": ["gemm", "softmax"],
    "level2/4_Conv2d_BatchNorm_ReLU": ["conv", "batch_norm"],
    "level2/5_ResidualAdd_LayerNorm": ["layer_norm"],
    "level2/6_Scale_Bias_Tanh_Clamp": ["elementwise"],
    "level2/7_Gemm_Sigmoid_RowSum": ["gemm", "reduction"],
    "level2/8_Bmm_Softmax": ["gemm", "softmax"],
    "level3/1_MLP": ["gemm"] * 4,
    "level3/2_CNNStage": ["conv", "batch_norm", "conv", "batch_norm", "pool"],
    "level3/3_ResidualBlock": ["conv", "batch_norm", "conv", "batch_norm"],
    "level3/4_AttentionBlock": ["gemm", "gemm", "gemm", "attention", "copy", "gemm"],  # copy: the head merge
    "level3/5_RecurrentLoop": ["gemm"] * 256 + ["copy"],  # the stack: two launches of our concat
    "level3/6_TransformerMLP": ["layer_norm", "gemm", "gemm"],
}


@pytest.mark.skipif(not SUITE.is_dir(), reason="evals/suite not present")
@pytest.mark.parametrize("name", sorted(SUITE_KINDS))
def test_suite_problem_plans(name: str) -> None:
    path = SUITE / f"{name}.py"
    if not path.exists():
        pytest.skip(f"{name} not in the suite")
    plan = OfflinePolicy().plan(Task(name=path.stem, path=str(path), source=path.read_text()), None)
    assert plan.traced
    assert kinds(plan) == SUITE_KINDS[name]
    assert set(plan.uncovered_ops) <= {"max_pool2d", "stack"}
    assert plan.total_bytes > 0 and plan.total_flops > 0


def test_library_calls_host_time_marks_a_forward_host_bound() -> None:
    """DenseNet's block: its kernels are long enough (~11 us of speed of light per launch) for the
    launch rule, but 13 cuDNN calls and 14 of ours cost more host time than the whole speed of light."""
    path = Path(__file__).parents[2] / "evals" / "suite" / "level3" / "8_DenseBlock.py"
    task = Task(name=path.stem, path=str(path), source=path.read_text())
    plan = build_plan(task, analyse(task), None)
    per_launch, host, sol = (
        float(re.search(pattern, plan.host.notes).group(1))  # type: ignore[union-attr]
        for pattern in (r"\(([\d.]+) us each\)", r"~(\d+) us of host calls", r"speed of light ([\d.]+) us")
    )
    assert per_launch >= 2 * LAUNCH_US and host > sol
    assert plan.host.cuda_graph
    single = plan_for("level2/4_Conv_BN_ReLU.py")  # five launches: a graph's copies would not pay
    assert "us of host calls" in single.host.notes and not single.host.cuda_graph


@pytest.mark.skipif(not SUITE.is_dir(), reason="evals/suite not present")
def test_a_cuda_graph_pays_only_where_its_input_copies_cost_less_than_the_host_time_saved() -> None:
    """A group norm over a 268 MB input (one group: ~20 us of host calls) would copy that input into
    the graph's buffer on every call (~125 us at the H200's copy ceiling): no graph, planned or offered
    by the optimiser. DenseNet's block copies 6 us of input to save a millisecond of host calls."""
    from codegen.schedule.plan import graph_input_copy_us, graph_pays, groups_host_us

    def suite_task(name: str) -> Task:
        path = SUITE / f"{name}.py"
        return Task(name=path.stem, path=str(path), source=path.read_text())

    norm = analyse(suite_task("level1/30_GroupNorm"))
    assert graph_input_copy_us(norm) == pytest.approx(2 * 16 * 64 * 256 * 256 * 4 / 4.3e12 * 1e6, rel=0.05)
    assert groups_host_us(norm.groups) == 20.0 and not graph_pays(norm)
    dense = analyse(suite_task("level3/8_DenseBlock"))
    assert graph_input_copy_us(dense) < 10 and graph_pays(dense)
    # the offline optimiser, asked for a graph by a host-bound diagnosis, does not write one here
    policy = OfflinePolicy()
    task = suite_task("level1/30_GroupNorm")
    plan = policy.plan(task, None)
    first = policy.write(task, plan, 1)
    feedback = Feedback(kind="optimize", summary="host-bound", suggestions=[CUDA_GRAPH_ADVICE])
    second = policy.revise(task, plan, first, feedback, "optimize", 2)
    assert "_StitchGraphRunner()" not in second.source and "CUDA graph" not in second.summary
