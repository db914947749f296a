"""The program model the static rules read: one parse of the candidate's source, its imports and native code.

Why: every rule asks the same questions (what does this name refer to through the imports, which
strings are C++/CUDA source, which functions run per forward call, which expressions hold a built
extension), so they are answered once, in `parse_program`. Standard library only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from tools.checks.vocabulary import BUILDERS, NATIVE_MARKERS, PATCHABLE_ROOTS


@dataclass
class Program:
    """What the rules need to know about one program."""

    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted module path
    native: list[tuple[int, str]] = field(default_factory=list)  # (line, native source text)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    runtime: list[ast.AST] = field(default_factory=list)  # functions that run per forward call
    builders: set[str] = field(default_factory=set)  # module functions that build an extension
    extensions: set[str] = field(default_factory=set)  # expressions bound to built extensions


def parse_program(source: str) -> Program:
    tree = ast.parse(source)
    program = Program(tree=tree)
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            program.parents[child] = node
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    program.aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    program.aliases.setdefault(root, root)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                program.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ClassDef):
            program.classes.setdefault(node.name, node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and is_native(node, program):
            program.native.append((node.lineno, node.value))
        is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if is_function and getattr(node, "name", "") != "__init__":
            program.runtime.append(node)
    for node in tree.body:  # module-level aliases of library objects: `Event = torch.cuda.Event`
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Attribute, ast.Name)):
            target = qualname(node.value, program.aliases)
            if target and target.split(".")[0] in PATCHABLE_ROOTS and "." in target:
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        program.aliases[t.id] = target
    program.builders = builder_functions(program)
    program.extensions = extension_names(program)
    return program


def is_native(node: ast.Constant, program: Program) -> bool:
    """A string that is C++/CUDA source (not a docstring) and carries a native marker."""
    parent = program.parents.get(node)
    if isinstance(parent, ast.Expr):  # a docstring or a bare string statement
        return False
    return isinstance(node.value, str) and bool(NATIVE_MARKERS.search(node.value))


def qualname(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """'torch.cuda.synchronize' for an expression naming it through the program's imports."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = qualname(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    return None


def line_of(node: ast.AST) -> int:
    return int(getattr(node, "lineno", 0))


def snippet(node: ast.AST, limit: int = 80) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every node the parser makes
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def lines_text(lines: list[int]) -> str:
    unique = sorted(set(lines))
    shown = ", ".join(str(n) for n in unique[:8]) + (", ..." if len(unique) > 8 else "")
    return f"line{'s' if len(unique) > 1 else ''} {shown}"


def walk_runtime(program: Program) -> Iterator[ast.AST]:
    """Every node inside functions that can run per call (everything but __init__ bodies)."""
    seen: set[int] = set()
    for function in program.runtime:
        for node in ast.walk(function):
            if id(node) not in seen:
                seen.add(id(node))
                yield node


def target_leaves(target: ast.AST) -> list[ast.AST]:
    if isinstance(target, (ast.Tuple, ast.List)):
        leaves: list[ast.AST] = []
        for elt in target.elts:
            leaves.extend(target_leaves(elt))
        return leaves
    return [target]


def builder_functions(program: Program) -> set[str]:
    """Module functions whose body calls an extension builder (e.g. a `_stitch_build` helper)."""
    names = set()
    for node in program.tree.body:
        if isinstance(node, ast.FunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and is_builder(inner, program, set()):
                    names.add(node.name)
                    break
    return names


def is_builder(call: ast.Call, program: Program, helpers: set[str]) -> bool:
    name = qualname(call.func, program.aliases) or ""
    return name in BUILDERS or name.endswith((".load_inline", "cpp_extension.load")) or name in helpers


def extension_names(program: Program) -> set[str]:
    """Expressions (`_ext`, `self.ext`) bound to a built extension, following plain aliases."""
    names: set[str] = set()
    for _ in range(3):
        for node in ast.walk(program.tree):
            if not isinstance(node, ast.Assign):
                continue
            value = node.value
            bound = (isinstance(value, ast.Call) and is_builder(value, program, program.builders)) or (
                isinstance(value, (ast.Name, ast.Attribute)) and snippet(value) in names
            )
            if bound:
                names.update(snippet(t) for t in node.targets)
    return names
