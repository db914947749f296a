"""Attention routed to the fused kernel (templates/attention.cuh) end to end: SDPA (4-D, 3-D, causal,
MinGPT's head split of one (B, T, 3C) projection) and nn.MultiheadAttention (batch_first either way,
weights unread or not asked for) and attention written out by hand (MinGPT's masked_fill of a
lower-triangular buffer, a bmm chain with a division, an input mask compared with any fill) are
planned as one ATTENTION op, and their programs match the PyTorch
reference in the CPU emulation, masks read in the kernel (float ones added: SDPA's and MHA's
attn_mask, a hand-written bias; bool ones with their own meanings: SDPA's True keeps a key, MHA's True
masks it); head dims past 128, MHA weights that are read and hand-written scores read twice keep the
written-out form (GEMMs and a row softmax), which still verifies. A demoted group runs the
written-out math in torch; the kernel's refusal (801) raises."""

from __future__ import annotations

import math
import runpy
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support.emulated_programs import emulated_outputs, program_source
from support.nvcc_build import NVCC, build_and_load

from codegen.emit.runtime import _stitch_attention_math
from codegen.frontend.ops import ATTENTION, OTHER, SOFTMAX
from codegen.policy import OfflinePolicy
from graph.artifacts import Task
from tools.checks import static_findings, verdict

PROBLEM = """
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {params}):
{body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

MINGPT_INIT = "        self.c_attn = nn.Linear(32, 96)\n        self.c_proj = nn.Linear(32, 32)"
MINGPT_BODY = """        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, 4, C // 4).transpose(1, 2)
        k = k.view(B, T, 4, C // 4).transpose(1, 2)
        v = v.view(B, T, 4, C // 4).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))"""
NO_INIT = "        pass"
MINGPT_MASKED_INIT = (
    MINGPT_INIT
    + """
        self.attn_dropout = nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16))"""
)
MINGPT_MASKED_BODY = """        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, 4, C // 4).transpose(1, 2)
        k = k.view(B, T, 4, C // 4).transpose(1, 2)
        v = v.view(B, T, 4, C // 4).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))"""
MHA = "        self.attn = nn.MultiheadAttention(32, 4, batch_first={})"

# label -> (init, forward parameters, body, inputs)
FUSED = {
    "sdpa Tq != Tk, D != Dv": (
        NO_INIT,
        "q, k, v",
        "        return F.scaled_dot_product_attention(q, k, v)",
        "torch.randn(2, 3, 9, 16), torch.randn(2, 3, 11, 16), torch.randn(2, 3, 11, 8)",
    ),
    "sdpa causal": (
        NO_INIT,
        "q, k, v",
        "        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)",
        "torch.randn(2, 2, 13, 20), torch.randn(2, 2, 13, 20), torch.randn(2, 2, 13, 20)",
    ),
    "sdpa 3-d": (
        NO_INIT,
        "q, k, v",
        "        return F.scaled_dot_product_attention(q, k, v)",
        "torch.randn(6, 7, 12), torch.randn(6, 5, 12), torch.randn(6, 5, 12)",
    ),
    "mingpt causal head split": (MINGPT_INIT, "x", MINGPT_BODY, "torch.randn(2, 10, 32)"),
    "mingpt masked_fill of a buffer": (MINGPT_MASKED_INIT, "x", MINGPT_MASKED_BODY, "torch.randn(2, 10, 32)"),
    "bmm chain divided": (
        NO_INIT,
        "q, k, v",
        "        return torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)) / 4.0, dim=-1), v)",
        "torch.randn(6, 7, 12), torch.randn(6, 5, 12), torch.randn(6, 5, 20)",
    ),
    "input mask compared, finite fill": (
        NO_INIT,
        "q, k, v, m",
        "        s = 0.5 * torch.matmul(q, k.transpose(-1, -2))\n"
        "        return torch.matmul(s.masked_fill(m > 0.5, -1e4).softmax(-1), v)",
        "torch.randn(2, 3, 9, 16), torch.randn(2, 3, 11, 16), torch.randn(2, 3, 11, 16), torch.rand(3, 1, 11)",
    ),
    "sdpa float mask": (
        NO_INIT,
        "q, k, v, mask",
        "        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
        "torch.randn(2, 2, 9, 16), torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 16), torch.randn(9, 11)",
    ),
    "mha float mask": (
        MHA.format(True),
        "x, m",
        "        return self.attn(x, x, x, attn_mask=m)[0]",
        "torch.randn(2, 7, 32), torch.randn(7, 7)",
    ),
    "hand-written additive bias": (
        NO_INIT,
        "q, k, v, bias",
        "        s = torch.matmul(q, k.transpose(-2, -1)) * 0.25\n"
        "        return torch.matmul(torch.softmax(bias + s, dim=-1), v)",
        "torch.randn(2, 3, 9, 16), torch.randn(2, 3, 11, 16), torch.randn(2, 3, 11, 8), torch.randn(3, 9, 11)",
    ),
    "sdpa bool mask": (
        NO_INIT,
        "q, k, v, mask",
        "        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
        "torch.randn(2, 2, 9, 16), torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 16),"
        " torch.ones(9, 11, dtype=torch.bool).tril()",
    ),
    "mha bool mask, True masks": (
        MHA.format(True),
        "x, m",
        "        return self.attn(x, x, x, attn_mask=m, need_weights=False)[0]",
        "torch.randn(2, 7, 32), torch.ones(7, 7, dtype=torch.bool).triu(1)",
    ),
    "mha batch_first, weights unread": (
        MHA.format(True),
        "x",
        "        return self.attn(x, x, x)[0]",
        "torch.randn(2, 7, 32)",
    ),
    "mha seq first cross, need_weights=False": (
        MHA.format(False),
        "x, m",
        "        return self.attn(x, m, m, need_weights=False)[0]",
        "torch.randn(6, 2, 32), torch.randn(9, 2, 32)",
    ),
}
WRITTEN_OUT = {
    "sdpa head dim 136": (
        NO_INIT,
        "q, k, v",
        "        return F.scaled_dot_product_attention(q, k, v)",
        "torch.randn(1, 1, 5, 136), torch.randn(1, 1, 6, 136), torch.randn(1, 1, 6, 136)",
    ),
    "mha weights read": (
        MHA.format(True),
        "x",
        "        out, w = self.attn(x, x, x)\n        return out, w",
        "torch.randn(2, 7, 32)",
    ),
    "hand-written scores read twice": (
        NO_INIT,
        "q, k, v",
        "        s = q @ k.transpose(-2, -1) * 0.25\n        return torch.softmax(s, dim=-1) @ v, s",
        "torch.randn(2, 2, 9, 16), torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 16)",
    ),
}
CASES = {**FUSED, **WRITTEN_OUT}


def source(label: str) -> str:
    init, params, body, inputs = CASES[label]
    return PROBLEM.format(init=init, params=params, body=body, inputs=inputs)


def write_problem(tmp_path: Path, label: str) -> Path:
    path = tmp_path / "attention_problem.py"
    path.write_text(source(label))
    return path


def plan_of(label: str) -> Any:
    return OfflinePolicy().plan(
        Task(name="attention_case", path="attention_case.py", source=source(label)), None
    )


@pytest.mark.parametrize("label", list(FUSED))
def test_attention_is_planned_as_one_covered_op(label: str) -> None:
    policy = OfflinePolicy()
    task = Task(name="attention_case", path="attention_case.py", source=source(label))
    plan = policy.plan(task, None)
    kinds = [g.kind for g in plan.groups]
    assert kinds.count(ATTENTION) == 1, kinds
    assert SOFTMAX not in kinds and OTHER not in kinds and "reference" not in kinds, kinds
    assert not plan.uncovered_ops, plan.uncovered_ops
    ops = [op for op in plan.ops if op.op == "attention"]
    assert len(ops) == 1 and ops[0].covered and ops[0].flops > 0
    program = policy.write(task, plan, 1)
    assert "_ext.attention_" in program.source and "lib attention" in program.source
    findings = static_findings(program.source)
    assert verdict(findings) == "clean", findings


def test_causal_flops_count_the_kept_half() -> None:
    causal = next(op for op in plan_of("sdpa causal").ops if op.op == "attention")
    pairs = 13 * 14 // 2  # keys j <= i of 13 queries
    assert causal.flops == 2 * 2 * pairs * (2 * 20 + 2 * 20 + 5)


@pytest.mark.parametrize("label", list(WRITTEN_OUT))
def test_what_the_kernel_cannot_take_stays_written_out(label: str) -> None:
    plan = plan_of(label)
    kinds = [g.kind for g in plan.groups]
    assert ATTENTION not in kinds and SOFTMAX in kinds, kinds
    assert not plan.uncovered_ops and not any(op.op == "attention" for op in plan.ops)


def test_programs_without_attention_do_not_carry_its_template() -> None:
    policy = OfflinePolicy()
    task = Task(name="attention_case", path="attention_case.py", source=source("sdpa head dim 136"))
    program = policy.write(task, policy.plan(task, None), 1)
    assert "lib attention" not in program.source and "_stitch_attention_math" not in program.source


@pytest.mark.parametrize("causal", [False, True])
def test_the_torch_form_is_pytorchs_attention(causal: bool) -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 8, 16), torch.randn(2, 3, 8, 16), torch.randn(2, 3, 8, 12)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    got = _stitch_attention_math(q, k, v, 1.0 / math.sqrt(16), causal)
    assert torch.allclose(got, expected, atol=1e-6, rtol=1e-5)


def _assert_close(expected: list[torch.Tensor], got: list[torch.Tensor]) -> None:
    assert len(expected) == len(got)
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape and torch.allclose(g, e, atol=1e-5, rtol=1e-4), float((g - e).abs().max())


@pytest.mark.slow
@pytest.mark.parametrize("label", list(CASES))
def test_attention_programs_compute_the_reference_in_the_emulation(tmp_path: Path, label: str) -> None:
    problem = write_problem(tmp_path, label)
    program = program_source(problem)
    assert ("_ext.attention_" in program) == (label in FUSED)
    _assert_close(*emulated_outputs(problem, program))


@pytest.mark.parametrize(
    ("label", "merged"),
    [("mingpt causal head split", True), ("mingpt masked_fill of a buffer", True), ("sdpa causal", False)],
)
def test_a_head_merge_reads_the_kernels_output_in_place(label: str, merged: bool) -> None:
    """When the output's only reader is `transpose(1, 2)`, the kernel writes (B, T, H, Dv) memory, so the
    merge's `.contiguous()` aliases it (no copy launched); an output read as it is stays (B, H, T, Dv)."""
    policy = OfflinePolicy()
    task = Task(name="attention_case", path="attention_case.py", source=source(label))
    program = policy.write(task, policy.plan(task, None), 1).source
    assert (
        "torch.empty((B, Tq, H, Dv), device=q.device, dtype=torch.float32).transpose(1, 2)" in program
    ) == merged
    assert ("torch.empty((B, H, Tq, Dv)," in program) != merged


@pytest.mark.slow
def test_a_kernel_refusal_raises_with_the_sizes(tmp_path: Path) -> None:
    """801 cannot come from a planned group; were it returned, the helper says so rather than
    return the unwritten output."""
    problem = write_problem(tmp_path, "mingpt causal head split")
    program = program_source(problem)
    call = "code = _ext.attention_"
    assert program.count(call) == 1
    with pytest.raises(RuntimeError, match=r"stitch_attention returned CUDA error 801 for q \(2, 4, 10, 8\)"):
        emulated_outputs(problem, program.replace(call, "code = 801 or _ext.attention_"))


def test_a_demoted_attention_group_runs_as_pytorch(tmp_path: Path) -> None:
    """Every group at level 2: the forward calls the runtime's torch form, which the program carries."""
    problem = write_problem(tmp_path, "mha batch_first, weights unread")
    program = program_source(problem, levels=2)
    assert "def _stitch_attention_math" in program and "= _stitch_attention_math(" in program
    namespace: dict[str, Any] = {}
    exec(compile(program, "attention_program.py", "exec"), namespace)  # noqa: S102 - our own program
    reference: dict[str, Any] = runpy.run_path(str(problem))
    torch.manual_seed(42)
    model = reference["Model"]()
    torch.manual_seed(42)
    ours = namespace["ModelNew"]()
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        _assert_close([model(x)], [ours(x)])


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_an_attention_program_builds_with_nvcc(tmp_path: Path) -> None:
    problem = write_problem(tmp_path, "mingpt causal head split")
    program = tmp_path / "attention_solution.py"
    program.write_text(program_source(problem))
    assert any(name.startswith("attention_") for name in build_and_load(program, problem)), program
