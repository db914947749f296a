"""The layout's import rules, read from the source (AST, function-level imports included).

- The worker island (tools/worker, tools/build) runs on a bare CUDA box: it imports only torch, the
  standard library, tools.protocol, tools.process, tools.cache_paths and itself.
- No import circle anywhere in the repository's packages, however deep the import sits.
- A node module (planner, coder, verifier, profiler, finalize) never imports another node module.
- No source module is over 600 lines (CUDA templates are .cuh files and the suite's problem files are
  not modules, so neither is counted).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("graph", "nodes", "codegen", "tools", "rag_corpus", "evals", "rl")
ISLAND = ("tools.worker", "tools.build")
ISLAND_MAY_IMPORT = ("torch", "tools.protocol", "tools.process", "tools.cache_paths", *ISLAND)
NODE_MODULES = ("planner", "coder", "verifier", "profiler", "finalize")
MAX_MODULE_LINES = 600


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "suite" in path.relative_to(REPO).parts[:2]:  # evals/suite: problem files, not modules
                continue
            found[module_name(path)] = path
    return found


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """An import under `if TYPE_CHECKING:`: never executed, so no circle."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports(name: str, path: Path, known: set[str], runtime_only: bool = False) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in the file, at any depth; `from a import b` names a.b if it is one."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if runtime_only and _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                yield node.lineno, candidate if candidate in known else source


def within(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


def test_the_worker_island_imports_only_torch_the_standard_library_and_the_protocol() -> None:
    found = modules()
    known = set(found)
    wrong = []
    for name, path in found.items():
        if not within(name, ISLAND):
            continue
        for line, module in sorted(set(imports(name, path, known))):
            top = module.split(".")[0]
            if module == "__future__" or top in sys.stdlib_module_names or within(module, ISLAND_MAY_IMPORT):
                continue
            wrong.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert len([n for n in found if within(n, ISLAND)]) >= 9  # the walk saw the island
    assert not wrong, "the worker island reaches outside torch + stdlib + tools.protocol:\n" + "\n".join(
        wrong
    )


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    graph: dict[str, set[str]] = {}
    for name, path in found.items():
        targets = {module for _, module in imports(name, path, known, runtime_only=True) if module in known}
        graph[name] = targets - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_hidden_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_anywhere_in_the_repository() -> None:
    graph = import_graph()
    assert "tools.profilers.nsys" in graph and "graph.build" in graph  # the walk saw the packages
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_node_module_imports_another_node_module() -> None:
    found = modules()
    known = set(found)
    nodes = {f"nodes.{name}" for name in NODE_MODULES}
    assert nodes <= known
    wrong = [
        f"{found[name].relative_to(REPO)}:{line} imports {module}"
        for name in sorted(nodes)
        for line, module in imports(name, found[name], known)
        if within(module, tuple(nodes - {name}))
    ]
    assert not wrong, "a node imports another node:\n" + "\n".join(wrong)


def test_no_source_module_is_over_600_lines() -> None:
    found = modules()
    assert "tools.roofline" in found and "codegen.emit.assemble" in found  # the walk saw the packages
    sizes = {path: len(path.read_text().splitlines()) for path in found.values()}
    over = sorted((lines, path) for path, lines in sizes.items() if lines > MAX_MODULE_LINES)
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them by responsibility):\n" + "\n".join(
        f"{path.relative_to(REPO)}: {lines} lines" for lines, path in reversed(over)
    )
