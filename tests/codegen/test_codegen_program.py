"""Generated programs: standalone, valid, same parameters as the reference, correct PyTorch glue."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import torch

from codegen.emit.assemble import Options, arch_digits, assemble
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import analyse
from graph.artifacts import Task
from tools.problem import exec_problem_source

FIXTURES = Path(__file__).parents[1] / "fixtures" / "problems"
ALL = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("level*/*.py"))
ALLOWED_IMPORTS = {
    "torch",
    "math",
    "operator",
    "glob",
    "inspect",
    "os",
    "__future__",
    "typing",
    "collections",
}


def imported_modules(source: str) -> set[str]:
    """The top-level modules a source imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        if isinstance(node, ast.ImportFrom):
            found.add((node.module or "").split(".")[0])
    return found


def task_for(relative: str) -> Task:
    path = FIXTURES / relative
    return Task(name=path.stem, path=str(path), source=path.read_text())


def written_source(relative: str) -> str:
    task = task_for(relative)
    policy = OfflinePolicy()
    return policy.write(task, policy.plan(task, None), 1).source


def exec_without_build(source: str) -> dict[str, Any]:
    """Run a program except its extension build: everything that defines ModelNew still runs."""
    tree = ast.parse(source)
    tree.body = [
        node
        for node in tree.body
        if not (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", "") == "_stitch_build"
        )
    ]
    namespace: dict[str, Any] = {"__name__": "stitch_program_under_test"}
    exec(compile(tree, "<program>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("fixture", ALL)
def test_program_is_standalone_and_defines_modelnew(fixture: str) -> None:
    source = written_source(fixture)
    tree = ast.parse(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "ModelNew" in classes and "Model" not in classes
    bases = [ast.unparse(b) for b in classes["ModelNew"].bases]
    assert bases == ["nn.Module"]
    assert not any(isinstance(n, ast.Name) and n.id == "Model" for n in ast.walk(tree)), "never touches Model"
    allowed = ALLOWED_IMPORTS | imported_modules(task_for(fixture).source)  # the problem's own imports too
    assert imported_modules(source) <= allowed
    if "CUDA_SRC" in source:
        namespace = exec_without_build(source)
        assert (
            "torch/extension.h" not in namespace["CUDA_SRC"] and "#include <torch" not in namespace["CPP_SRC"]
        )
        assert "PYBIND11_MODULE" in namespace["CPP_SRC"] and "__global__" in namespace["CUDA_SRC"]
        assert "_stitch_build(" in source and "load_inline(" in source


@pytest.mark.parametrize("fixture", ALL)
def test_modelnew_has_the_reference_parameters_in_order(fixture: str) -> None:
    task = task_for(fixture)
    namespace = exec_without_build(written_source(fixture))
    problem = exec_problem_source(task.source, task.name)
    init = problem.get_init_inputs()
    torch.manual_seed(42)
    reference = problem.Model(*init)
    torch.manual_seed(42)
    candidate = namespace["ModelNew"](*init)
    ref_state, new_state = reference.state_dict(), candidate.state_dict()
    assert list(ref_state) == list(new_state)
    for key in ref_state:
        assert torch.equal(ref_state[key], new_state[key]), key


@pytest.mark.parametrize("fixture", ALL)
def test_all_pytorch_program_matches_the_reference_on_cpu(fixture: str) -> None:
    """With every group demoted to PyTorch, the regenerated forward must be the reference's: exactly,
    or within float32 rounding where the tracer wrote a call out as its formula (decompose.py)."""
    task = task_for(fixture)
    analysis = analyse(task)
    program = assemble(analysis, Options(levels={g.id: 2 for g in analysis.groups}))
    assert "CUDA_SRC" not in program.source
    namespace: dict[str, Any] = {}
    exec(compile(program.source, "<program>", "exec"), namespace)
    problem = exec_problem_source(task.source, task.name)
    init = problem.get_init_inputs()
    torch.manual_seed(42)
    reference = problem.Model(*init)
    torch.manual_seed(42)
    candidate = namespace["ModelNew"](*init)
    torch.manual_seed(7)
    inputs = problem.get_inputs()
    with torch.no_grad():
        expected, got = reference(*inputs), candidate(*inputs)
    assert analysis.traced is not None
    tolerance = 2e-6 if analysis.traced.decomposed else 0.0
    torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance)


def test_every_covered_group_has_a_marker_and_a_helper() -> None:
    analysis = analyse(task_for("level3/3_ResNet_BasicBlock.py"))
    program = assemble(analysis, Options())
    covered = [g.id for g in analysis.groups if g.covered]
    assert covered == ["g1", "g2", "g3", "g4", "g5", "g6"]
    # Groups whose code is all in a template library (cuDNN convs) are named by the binding's markers.
    sources = program.cuda_src.splitlines() + program.cpp_src.splitlines()
    markers = [line for line in sources if line.startswith("// group ")]
    for gid in covered:
        assert any(gid in line.split() for line in markers)
        call = next(line for line in program.source.splitlines() if line.endswith(f"  # {gid}"))
        helper = call.split("= ", 1)[1].split("(", 1)[0]  # identical helpers are shared (g3 calls _g1)
        assert f"def {helper}(" in program.source
    assert program.templates["g1"] == "cudnn_conv" and program.templates["g6"].startswith("bn_stats+ew")


def test_identical_loop_steps_share_one_kernel() -> None:
    program = assemble(analyse(task_for("level3/5_Elman_RNN.py")), Options())
    structs = [line for line in program.cuda_src.splitlines() if line.startswith("struct StitchEw_")]
    assert len(structs) == 1, "six unrolled tanh epilogues compile to one kernel"
    assert "_stitch_expect(x, (4, 6, 20))" in program.source


def test_cuda_graph_option_wraps_the_forward() -> None:
    program = assemble(analyse(task_for("level3/1_MLP.py")), Options(cuda_graph=True))
    assert "class _StitchGraphRunner" in program.source
    assert "def _stitch_forward(self" in program.source


def test_arch_flags_come_from_the_context() -> None:
    assert arch_digits("sm_90") == "90" and arch_digits("sm_90a") == "90a" and arch_digits("80") == "80"
    program = assemble(analyse(task_for("level1/1_ReLU.py")), Options(arch="sm_80"))
    assert "'80', use_cublas=False" in program.source
    with pytest.raises(ValueError, match="gpu_arch"):
        arch_digits("hopper")


def test_untraced_program_copies_the_forward() -> None:
    source = (
        (FIXTURES / "level1/1_ReLU.py")
        .read_text()
        .replace("return torch.relu(x)", "return torch.relu(x) if x.sum() > 0 else x")
    )
    task = Task(name="data_dependent", path="<memory>", source=source)
    program = assemble(analyse(task), Options())
    namespace: dict[str, Any] = {}
    exec(compile(program.source, "<program>", "exec"), namespace)
    x = torch.rand(3, 4)
    assert torch.equal(namespace["ModelNew"]()(x), torch.relu(x))


def test_programs_are_deterministic() -> None:
    assert written_source("level2/3_Matmul_Scale_Softmax.py") == written_source(
        "level2/3_Matmul_Scale_Softmax.py"
    )


SUITE = Path(__file__).parents[2] / "evals" / "suite"


@pytest.mark.parametrize("name", ["level3/14_ResNet18", "level3/23_Mamba2SSD", "level3/8_DenseBlock"])
def test_code_the_regenerated_forward_replaces_is_left_out(name: str) -> None:
    """Submodule classes keep their constructors but lose the forwards the trace inlined, helper
    methods and functions nothing calls any more go, so the static checks find no PyTorch fallback."""
    from tools.checks import static_findings, verdict

    path = SUITE / f"{name}.py"
    task = Task(name=path.stem, path=str(path), source=path.read_text())
    policy = OfflinePolicy()
    source = policy.write(task, policy.plan(task, None), 1).source
    findings = static_findings(source)
    assert verdict(findings) == "clean", [f for f in findings if f.get("severity") != "info"]
    tree = ast.parse(source)
    forwards = [
        c.name
        for c in tree.body
        if isinstance(c, ast.ClassDef)
        for m in c.body
        if isinstance(m, ast.FunctionDef) and m.name == "forward"
    ]
    assert forwards == ["ModelNew"]
    namespace = exec_without_build(source)  # the classes still build the reference's parameters
    problem = exec_problem_source(task.source, task.name)
    torch.manual_seed(42)
    reference = problem.Model(*problem.get_init_inputs())
    torch.manual_seed(42)
    candidate = namespace["ModelNew"](*problem.get_init_inputs())
    assert list(reference.state_dict()) == list(candidate.state_dict())
