"""notebooks/quickstart.ipynb runs top to bottom offline; any cell error fails the test.

The kernel is this interpreter (a kernelspec written to a temporary JUPYTER_PATH), so the test
works in any virtual environment with the `dev` extra, such as the fresh one `.ci/run` creates,
whatever `python` happens to be first on PATH.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import REPO

NOTEBOOK = REPO / "notebooks" / "quickstart.ipynb"
KERNEL = "stitchcuda-test-python"
CELL_LIMIT_S = 1200  # one cell runs the whole graph, including an nvcc build on a 2-core machine
OFFLINE_POLICY_READY = importlib.util.find_spec("codegen.policy") is not None


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernelspec that starts ipykernel with this very interpreter."""
    spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "StitchCUDA tests",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return KERNEL


def outputs_text(notebook: object) -> str:
    parts: list[str] = []
    for cell in notebook.cells:  # type: ignore[attr-defined]
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def test_the_notebook_is_committed_clean() -> None:
    """No stale outputs or execution counts from someone's machine in the repository."""
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)
    source = "\n".join(cell.source for cell in code)
    assert "graph.invoke(" in source and 'policy="offline"' in source and "draw_mermaid()" in source


@pytest.mark.slow
@pytest.mark.xfail(
    not OFFLINE_POLICY_READY,
    reason="the offline policy (codegen/policy.py) is not written yet; the notebook runs the graph with it",
    strict=False,
)
def test_the_quickstart_runs_top_to_bottom(kernel: str, tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=kernel,
        timeout=CELL_LIMIT_S,
        startup_timeout=120,
        resources={"metadata": {"path": str(REPO)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on any error

    text = outputs_text(notebook)
    assert "status: verified" in text or "status: unverified" in text
    assert "class ModelNew" in text
    assert "planner -.-> coder" in text  # the mermaid drawing
    nbformat.write(notebook, tmp_path / "executed.ipynb")  # kept for a look when something is off
