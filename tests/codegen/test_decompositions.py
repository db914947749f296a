"""Calls the tracer writes out (norms, losses, einsum, unfold), reshapes that copy, and the capture of
forwards that keep state, leave parameters at their defaults or branch on metadata (issue 19, points
2 and 4). Numerics are checked on the CPU: the traced graph in float64 against the reference, and
the regenerated program (every group as PyTorch) against the reference call after call."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import FIXTURES
from support.traced_numerics import (
    HEADER,
    assert_graph_matches_in_float64,
    fully_covered_plan,
    reference_model,
)

from codegen.emit.assemble import Options, assemble
from codegen.frontend.capture import trace_problem
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import analyse
from graph.artifacts import Plan, Task
from tools.problem import exec_problem_source

DECOMPOSED = FIXTURES / "problems" / "level2" / "33_Decomposed_Ops.py"
STATEFUL = FIXTURES / "problems" / "level3" / "7_Stateful_Cell.py"


def task_of(path: Path) -> Task:
    return Task(name=path.stem, path=str(path), source=path.read_text())


def plan_of(body: str) -> Plan:
    source = HEADER + textwrap.dedent(body)
    return OfflinePolicy().plan(Task(name="decomposed", path="<memory>", source=source), None)


def all_pytorch_model(task: Task) -> Any:
    """ModelNew of the program with every group demoted to PyTorch (no build), built after seed 42."""
    analysis = analyse(task)
    program = assemble(analysis, Options(levels={g.id: 2 for g in analysis.groups}))
    namespace: dict[str, Any] = {}
    exec(compile(program.source, "<program>", "exec"), namespace)
    problem = exec_problem_source(task.source, task.name)
    torch.manual_seed(42)
    return namespace["ModelNew"](*problem.get_init_inputs())


def test_every_written_out_call_matches_pytorch_in_float64() -> None:
    assert_graph_matches_in_float64(task_of(DECOMPOSED), 22, rtol=1e-12, atol=1e-12)


def test_written_out_calls_leave_nothing_to_pytorch() -> None:
    plan = OfflinePolicy().plan(task_of(DECOMPOSED), None)
    assert plan.traced and plan.uncovered_ops == []
    covered = set(plan.covered_ops)
    assert {
        "sqrt",
        "sum",
        "xlogy",
        "log_softmax",
        "matmul",
        "bmm",
        "reshape",
        "nll_pick",
        "logsumexp",
    } <= covered
    for name in ("norm", "einsum", "unfold", "kl_div", "smooth_l1_loss", "tripletmarginloss", "huberloss"):
        assert name not in covered
    kinds = [g.kind for g in plan.groups]
    assert kinds.count("gemm") == 4 and "copy" in kinds  # one GEMM per einsum; reshapes gathered


@pytest.mark.parametrize(
    ("call", "name"),
    [
        ("F.cross_entropy(x, t, label_smoothing=0.1)", "cross_entropy"),  # label smoothing
        ("x.unfold(1, 4, 2)", "unfold"),  # overlapping windows
        ("torch.einsum('ii->i', x[:, :8])", "einsum"),  # a diagonal
        ("torch.norm(x[:, :8], p='nuc')", "norm"),  # a matrix norm
        ("F.smooth_l1_loss(x, x * 2, size_average=True)", "smooth_l1_loss"),  # legacy argument
    ],
)
def test_variants_not_written_out_stay_one_named_call(call: str, name: str) -> None:
    plan = plan_of(
        f"""
        class Model(nn.Module):
            def forward(self, x, t):
                return {call}


        def get_inputs():
            return [torch.rand(8, 16), torch.randint(0, 16, (8,))]


        def get_init_inputs():
            return []
        """
    )
    assert plan.traced and plan.uncovered_ops == [name]


SCALED_GEMMS = """
class Model(nn.Module):
    def forward(self, c, a, b, bias, p, q, r):
        return (
            torch.addmm(c, a, b, beta=0.5, alpha=2.0),
            c.addmm(a, b, alpha=-1.5),
            torch.addmm(c[:1], a, b, beta=0),
            torch.addmm(bias, a, b),
            torch.baddbmm(r, p, q, beta=2.0, alpha=0.25),
            r.baddbmm(p, q),
        )


def get_inputs():
    return [torch.rand(9, 7), torch.rand(9, 5), torch.rand(5, 7), torch.rand(7), torch.rand(3, 4, 6),
            torch.rand(3, 6, 2), torch.rand(3, 4, 2)]


def get_init_inputs():
    return []
"""


def test_scaled_addmm_and_baddbmm_are_a_gemm_and_elementwise_ops() -> None:
    task = Task(name="scaled_gemms", path="<memory>", source=HEADER + SCALED_GEMMS)
    plan = fully_covered_plan(task)
    assert {"mm", "bmm", "addmm"} <= set(plan.covered_ops)  # a bias row stays one fused addmm

    def nan_in_added_matrix(inputs: list[Any]) -> None:  # beta == 0 ignores it, as PyTorch
        inputs[0][0, 0] = float("nan")

    assert_graph_matches_in_float64(task, None, 1e-12, 1e-12, nan_in_added_matrix, equal_nan=True)


STATS = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bce = nn.BCEWithLogitsLoss(reduction="sum")
        self.weighted = nn.BCELoss(weight=torch.linspace(0.5, 1.5, 9))
        self.positive = nn.BCEWithLogitsLoss(pos_weight=torch.linspace(2.0, 3.0, 9))

    def forward(self, x, y, p, t):
        return (
            torch.var(x, 1),
            x.var(),
            x.var(1, unbiased=False, keepdim=True),
            torch.var(x, dim=(0, 1), correction=0),
            x.std(dim=-1, keepdim=True),
            torch.std(x, True),
            F.binary_cross_entropy(p, t),
            F.binary_cross_entropy(p, t, weight=y, reduction="none"),
            F.binary_cross_entropy_with_logits(x, t),
            F.binary_cross_entropy_with_logits(x, t, weight=y, pos_weight=y[0], reduction="none"),
            self.bce(x, t),
            torch.lerp(x, y, 0.3),
            x.lerp(y, 0.8),
            torch.lerp(x, y, -0.7),
            self.weighted(p, t),
            self.positive(x, t),
        )


def get_inputs():
    p = torch.rand(6, 9)
    p[0, :3] = torch.tensor([0.0, 1.0, 1e-30])  # logs clamped at -100, as PyTorch
    return [torch.randn(6, 9) * 4, torch.rand(6, 9), p, torch.rand(6, 9)]


def get_init_inputs():
    return []
"""


def test_variance_binary_cross_entropy_and_lerp_are_written_out_exactly() -> None:
    task = Task(name="stats", path="<memory>", source=HEADER + STATS)
    plan = fully_covered_plan(task)
    for name in ("var", "std", "binary_cross_entropy", "binary_cross_entropy_with_logits", "lerp"):
        assert name not in plan.covered_ops
    assert_graph_matches_in_float64(task, 16, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        ("torch.lerp(x, t, t)", "lerp"),  # a tensor weight
        ("torch.var(x, dim=0, correction=8)", "var"),  # N - correction <= 0
        ("F.binary_cross_entropy(torch.sigmoid(x), t, size_average=True)", "binary_cross_entropy"),  # legacy
    ],
)
def test_statistics_variants_not_written_out_stay_one_named_call(call: str, name: str) -> None:
    plan = plan_of(
        f"""
        class Model(nn.Module):
            def forward(self, x, t):
                return {call}


        def get_inputs():
            return [torch.rand(8, 16), torch.rand(8, 16)]


        def get_init_inputs():
            return []
        """
    )
    assert plan.traced and name in plan.uncovered_ops, plan.uncovered_ops


def test_a_decomposition_that_gives_up_leaves_no_operator_behind() -> None:
    """pos_weight that is not a traced tensor: the formula's first ops were recorded before it gave
    up; they are erased, so the plan holds only the original call (and the constant it reads)."""
    plan = plan_of(
        """
        class Model(nn.Module):
            def forward(self, x, t):
                return F.binary_cross_entropy_with_logits(x, t, pos_weight=torch.tensor(2.0))


        def get_inputs():
            return [torch.rand(8, 16), torch.rand(8, 16)]


        def get_init_inputs():
            return []
        """
    )
    assert plan.traced and "binary_cross_entropy_with_logits" in plan.uncovered_ops
    assert plan.covered_ops == []


def test_a_legacy_argument_form_stays_the_original_call() -> None:
    plan = plan_of(
        """
        class Model(nn.Module):
            def forward(self, c, a, b):
                return torch.addmm(0.5, c, 2.0, a, b)


        def get_inputs():
            return [torch.rand(9, 7), torch.rand(9, 5), torch.rand(5, 7)]


        def get_init_inputs():
            return []
        """
    )
    assert plan.traced and plan.uncovered_ops == ["addmm"]


def test_a_reshape_that_copies_is_our_gather_and_one_that_views_stays_a_view() -> None:
    plan = plan_of(
        """
        class Model(nn.Module):
            def forward(self, x):
                merged = x.transpose(1, 2).reshape(x.shape[0], -1)  # not viewable: a copy
                flat = x.reshape(x.shape[0], -1)  # contiguous: a view
                return merged * 2.0, flat + 1.0


        def get_inputs():
            return [torch.rand(4, 6, 10)]


        def get_init_inputs():
            return []
        """
    )
    assert plan.uncovered_ops == []
    copies = [g for g in plan.groups if g.kind == "copy"]
    assert len(copies) == 1 and "reshape" in copies[0].nodes
    assert "reshape" in plan.covered_ops


def test_a_stateful_cell_regenerates_its_state_call_after_call() -> None:
    """Attribute writes (`self.hidden = ...`), an in-place copy into the attribute, a device check,
    a constant made with torch.tensor, defaulted parameters, a constructor meta cannot run."""
    task = task_of(STATEFUL)
    fully_covered_plan(task)
    reference, problem = reference_model(task)
    candidate = all_pytorch_model(task)
    for step in range(3):
        torch.manual_seed(10 + step)
        x, h0 = problem.get_inputs()
        with torch.no_grad():
            want = reference(x, h0.clone())
            got = candidate(x, h0.clone())
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(candidate.hidden, reference.hidden, rtol=0, atol=0)
    with pytest.raises(ValueError, match="traced with mask=None"):
        candidate(x, h0, torch.ones(1))


def test_state_writes_turn_off_the_cuda_graph_replay() -> None:
    analysis = analyse(task_of(STATEFUL))
    program = assemble(analysis, Options(cuda_graph=True))
    assert "_StitchGraphRunner()" not in program.source and "self.hidden = " in program.source


INPLACE = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(8, 16))

    def forward(self, x):
        t = x * 2.0
        t.add_(1.0)
        u = t + 1.0
        t.mul_(3.0)
        self.total.add_(u)
        return u, t, self.total * 1.0


def get_inputs():
    return [torch.rand(8, 16)]


def get_init_inputs():
    return []
"""


def test_in_place_updates_are_read_by_the_ops_that_follow_them(tmp_path: Path) -> None:
    path = tmp_path / "inplace.py"
    path.write_text(HEADER + INPLACE)
    task = task_of(path)
    _, traced = trace_problem(task.source, task.name)
    assert traced.state_writes == ["total"]
    assert OfflinePolicy().plan(task, None).uncovered_ops == []
    reference, problem = reference_model(task)
    candidate = all_pytorch_model(task)
    for _ in range(2):
        x = problem.get_inputs()[0]
        with torch.no_grad():
            for want, got in zip(reference(x), candidate(x), strict=True):
                torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(candidate.total, reference.total, rtol=0, atol=0)


def test_an_optional_parameter_at_its_default_is_traced_and_checked() -> None:
    plan = plan_of(
        """
        class Model(nn.Module):
            def forward(self, x, mask=None, scale=1.5):
                if mask is not None:
                    x = x * mask
                return torch.relu(x) * scale


        def get_inputs():
            return [torch.rand(4, 8)]


        def get_init_inputs():
            return []
        """
    )
    assert plan.traced and plan.uncovered_ops == []


einops = pytest.importorskip("einops")

REARRANGE = """
from einops import rearrange


class Model(nn.Module):
    def forward(self, x, y):
        return (
            rearrange(x, "b (c l) ... -> b c l ...", l=4),
            rearrange(x, "b t h d -> b h t d"),
            rearrange(x, "b t h d -> (b h) (t d)"),
            rearrange(y, "(b h) w -> b w h", h=3),
            rearrange(x, "b t ... -> (b t) ..."),
        )


def get_inputs():
    return [torch.rand(2, 12, 3, 5), torch.rand(6, 7)]


def get_init_inputs():
    return []
"""


def test_einops_rearrange_is_written_out_as_reshapes_and_permutes(tmp_path: Path) -> None:
    path = tmp_path / "rearrange.py"
    path.write_text(HEADER + REARRANGE)
    task = task_of(path)
    _, traced = trace_problem(task.source, task.name)
    assert not [n for n in traced.graph.nodes if n.op == "call_function" and n.target is einops.rearrange]
    x, y = torch.rand(2, 12, 3, 5, dtype=torch.float64), torch.rand(6, 7, dtype=torch.float64)
    module = torch.fx.GraphModule(traced.root, traced.graph)
    expected = exec_problem_source(task.source, task.name).Model()(x, y)
    for want, got in zip(expected, module(x, y), strict=True):
        assert torch.equal(got, want)
    plan = OfflinePolicy().plan(task, None)
    assert plan.uncovered_ops == [] and "copy" in [g.kind for g in plan.groups]  # the permuted merges


def test_einops_repeat_stays_one_named_call() -> None:
    plan = plan_of(
        """
        from einops import repeat


        class Model(nn.Module):
            def forward(self, x):
                return repeat(x, "b d -> b r d", r=3) * 2.0


        def get_inputs():
            return [torch.rand(4, 8)]


        def get_init_inputs():
            return []
        """
    )
    assert plan.traced and plan.uncovered_ops == ["repeat"]


def test_a_chunked_state_space_scan_is_fully_ours_and_exact() -> None:
    """Mamba2's SSD (KernelBench level3/48-49) at small sizes: rearranges, a triangle-masked
    segment sum, four-operand einsums, a pad; the graph in float64 equals the reference."""
    task = task_of(FIXTURES / "problems" / "level3" / "8_SSD_Chunked_Scan.py")
    plan = fully_covered_plan(task)
    assert {"masked_fill_tri", "bmm", "cumsum", "pad"} <= set(plan.covered_ops)
    _, traced = trace_problem(task.source, task.name)
    reference, problem = reference_model(task)
    reference = reference.double()
    graph_module = torch.fx.GraphModule(reference, traced.graph)  # the reference's own parameters
    x = problem.get_inputs()[0].double()
    torch.testing.assert_close(graph_module(x), reference(x), rtol=1e-12, atol=1e-12)
