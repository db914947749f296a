"""Every program the offline policy writes for the suite survives KernelBench's loader (no build).

KernelBench's scripts put `import os` and a TORCH_EXTENSIONS_DIR assignment in front of the
solution and exec it (docs/kernelbench.md §1), so nothing may depend on being the first statement
of a file. The real build-and-load through that path is in test_codegen_build.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from codegen.policy import OfflinePolicy
from graph.artifacts import Task
from graph.context import Context

SUITE = Path(__file__).parents[2] / "evals" / "suite"
PROBLEMS = sorted(SUITE.glob("level*/*.py"))
KERNELBENCH_PREFIX = "import os\nos.environ['TORCH_EXTENSIONS_DIR'] = '/tmp/kb-build'\n"


@pytest.fixture(scope="module")
def policy() -> OfflinePolicy:
    return OfflinePolicy(Context(gpu_arch="sm_90"))


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_program_compiles_after_kernelbench_prefix_and_defines_model_new(
    path: Path, policy: OfflinePolicy
) -> None:
    task = Task(name=path.stem, path=str(path), source=path.read_text())
    source = policy.write(task, policy.plan(task, None), 1).source
    compile(KERNELBENCH_PREFIX + source, "<string>", "exec")  # a SyntaxError fails the test
    tree = ast.parse(source)
    top_classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    assert "ModelNew" in top_classes
    futures = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    assert not futures, "a `from __future__` import is a SyntaxError once KernelBench prepends its lines"
