"""The recurrent family on the CPU: LSTM, GRU and RNN modules planned as our GEMM plus our fused
step kernels (never PyTorch's recurrence), one generated program built by the real nvcc, and the
programs' numerics in the CPU emulation (on a GPU: tests/gpu/test_rnn_gpu.py, float64 reference).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from support.emulated_programs import emulated_outputs, program_source
from support.nvcc_build import NVCC, build_and_load

from codegen.frontend.ops import OTHER, RNN
from codegen.policy import OfflinePolicy
from graph.artifacts import Task
from tools.checks import static_findings, verdict

SUITE = Path(__file__).parents[2] / "evals" / "suite"

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = {module}

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.rand({shape}) * 2 - 1]


def get_init_inputs():
    return []
"""

CASES = {
    "lstm 2 layers batch_first": (
        "nn.LSTM(12, 20, num_layers=2, batch_first=True)",
        "self.rnn(x)[0]",
        "3, 7, 12",
    ),
    "gru bidirectional h_n": ("nn.GRU(12, 20, bidirectional=True)", "self.rnn(x)[1]", "7, 3, 12"),
    "rnn relu no bias": ("nn.RNN(12, 20, nonlinearity='relu', bias=False)", "self.rnn(x)[0]", "7, 3, 12"),
}
# PyTorch's own recurrence entry points: the fp32 path of a covered program calls none of them.
TORCH_RECURRENCES = {"lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell"}


def task(label: str) -> Task:
    module, body, shape = CASES[label]
    return Task(
        name="rnn_case", path="rnn_case.py", source=PROBLEM.format(module=module, body=body, shape=shape)
    )


def pytorch_recurrence_calls(source: str) -> list[str]:
    """Calls into PyTorch's recurrence outside the TF32 path (which runs the reference's own cuDNN
    call on purpose: codegen.schedule.precision): module calls `self.rnn(...)`, torch/_VF entry points."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef) or fn.name.endswith("_tf32"):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            owner = ast.unparse(node.func.value)
            if owner == "self" and node.func.attr == "rnn" or node.func.attr in TORCH_RECURRENCES:
                found.append(f"{fn.name}: {ast.unparse(node.func)}")
    return found


@pytest.mark.parametrize("label", list(CASES))
def test_recurrent_modules_are_planned_as_our_rnn_family(label: str) -> None:
    policy = OfflinePolicy()
    plan = policy.plan(task(label), None)
    kinds = {g.kind for g in plan.groups}
    assert RNN in kinds, (label, kinds)
    assert OTHER not in kinds and "reference" not in kinds and not plan.uncovered_ops, plan.uncovered_ops
    program = policy.write(task(label), plan, 1)
    assert pytorch_recurrence_calls(program.source) == []
    findings = static_findings(program.source)
    assert [f for f in findings if f["severity"] != "info"] == [], findings
    assert verdict(findings) == "clean"


@pytest.mark.skipif(not SUITE.is_dir(), reason="evals/suite not present")
def test_every_suite_recurrent_model_is_fully_covered() -> None:
    names = ("LSTM", "GRU")
    files = [p for p in sorted(SUITE.glob("level3/*.py")) if any(n in p.stem for n in names)]
    assert len(files) >= 4
    policy = OfflinePolicy()
    for path in files:
        plan = policy.plan(Task(name=path.stem, path=str(path), source=path.read_text()), None)
        kinds = {g.kind for g in plan.groups}
        assert RNN in kinds and "reference" not in kinds and OTHER not in kinds, (
            path.stem,
            plan.uncovered_ops,
        )


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_an_lstm_program_builds_with_nvcc(tmp_path: Path) -> None:
    label = "lstm 2 layers batch_first"
    policy = OfflinePolicy()
    plan = policy.plan(task(label), None)
    program = tmp_path / "rnn_solution.py"
    program.write_text(policy.write(task(label), plan, 1).source)
    problem = tmp_path / "rnn_problem.py"
    problem.write_text(task(label).source)
    assert any("rnn" in name.lower() for name in build_and_load(program, problem)), program


EMULATED = {
    **CASES,
    # 19 batch entries: the step kernel's second chunk of the batch holds 3
    "lstm batch 19 c_n": ("nn.LSTM(6, 10, num_layers=2)", "self.rnn(x)[1][1]", "4, 19, 6"),
    # hidden 9: rows of W_hh off 16-byte alignment, so the step kernel loads floats one at a time
    "gru hidden 9 batch 18": ("nn.GRU(5, 9, batch_first=True)", "self.rnn(x)[0]", "18, 3, 5"),
}
PAST_ONE_TILE = {"lstm batch 19 c_n", "gru hidden 9 batch 18"}  # batch > 16: unfused by default


@pytest.mark.slow
@pytest.mark.parametrize("fused", [1, 0])
@pytest.mark.parametrize("label", list(EMULATED))
def test_recurrent_programs_compute_the_reference_in_the_emulation(
    tmp_path: Path, label: str, fused: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fused step kernel (knob `fused` 1, the default up to 16 batch entries) and the GEMM + cell
    path (0, the default past them) both give PyTorch's recurrence: several layers, both directions,
    no bias, h_n and c_n, batch chunks."""
    monkeypatch.setenv("STITCHCUDA_CUDNN_CACHE", "off")
    # the strict harness's precision: with cuDNN's TF32 allowed the program runs PyTorch's recurrence
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    module, body, shape = EMULATED[label]
    problem = tmp_path / "rnn_problem.py"
    problem.write_text(PROBLEM.format(module=module, body=body, shape=shape))
    source = program_source(problem)
    default = 0 if label in PAST_ONE_TILE else 1
    assert f"'fused': {default}" in source and f"'fused': {1 - default}" not in source
    expected, got = emulated_outputs(problem, source.replace(f"'fused': {default}", f"'fused': {fused}"))
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape and torch.allclose(g, e, atol=1e-5, rtol=1e-4), float((g - e).abs().max())
