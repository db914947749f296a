"""The layering of nodes/: no node module imports another, nor does node support code or codegen.

Read from the source (every import statement, module level or inside a function), so an import
hidden in a function body counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

NODE_MODULES = {f"nodes.{name}" for name in ("planner", "coder", "verifier", "profiler", "finalize")}


def imported_modules(path: Path) -> set[str]:
    """Absolute module names a file imports (`from nodes import profiler` counts as nodes.profiler)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def sources(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def test_no_node_module_imports_another() -> None:
    for path in sources("nodes"):
        me = module_name(path)
        others = (imported_modules(path) & NODE_MODULES) - {me}
        assert not others, f"{me} imports node module(s) {sorted(others)}"


def test_codegen_never_imports_nodes() -> None:
    for path in sources("codegen"):
        nodes = {m for m in imported_modules(path) if m == "nodes" or m.startswith("nodes.")}
        assert not nodes, f"{module_name(path)} imports {sorted(nodes)}"


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from nodes import profiler\n    import nodes.coder\n")
    assert {"nodes.profiler", "nodes.coder"} <= imported_modules(probe)
