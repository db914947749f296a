"""Source-level surgery on the reference problem file (via ast).

The generated program must recreate the reference's parameters in the same order without touching
the reference class, so it copies the problem's top-level code (imports, constants, helper classes)
and the body of `Model` (everything but `forward`) into `ModelNew`, renaming `Model` on the way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

KERNELBENCH_NAMES = ("Model", "get_inputs", "get_init_inputs")


class SourceError(ValueError):
    """The problem source lacks what the program needs; str() is one line."""


@dataclass
class ProblemSource:
    """The pieces of a problem file that a program reuses."""

    imports: list[str]
    prelude: list[str]  # other top-level statements, in order (constants, helper classes/functions)
    class_members: list[str]  # Model's body without forward, renamed to ModelNew
    forward_params: list[str]  # forward's parameter names, without self
    forward_signature: str  # "self, x: torch.Tensor"
    forward_source: str  # the original forward, renamed, for untraced programs
    top_level_names: set[str]


class _RenameModel(ast.NodeTransformer):
    """Model -> ModelNew, and super(Model, self) -> super()."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "Model":
            return ast.copy_location(ast.Name(id="ModelNew", ctx=node.ctx), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super" and node.args:
            node.args = []
        return node


def _unparse(node: ast.AST) -> str:
    return ast.unparse(ast.fix_missing_locations(node))


def _defined_names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    names: set[str] = set()
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    names.add(node.id)
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:
            names.add((alias.asname or alias.name).split(".")[0])
    return names


def parse_problem(source: str) -> ProblemSource:
    """Split a KernelBench problem into the parts a generated program copies."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SourceError(f"problem source does not parse: line {exc.lineno}: {exc.msg}") from None
    imports: list[str] = []
    prelude: list[str] = []
    model: ast.ClassDef | None = None
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Model":
            model = stmt
            continue
        if isinstance(stmt, ast.FunctionDef) and stmt.name in KERNELBENCH_NAMES:
            continue
        if (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            continue  # the module docstring
        names |= _defined_names(stmt)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                continue
            imports.append(_unparse(stmt))
        else:
            prelude.append(_unparse(_RenameModel().visit(stmt)))
    if model is None:
        raise SourceError("problem source defines no class Model")
    members: list[str] = []
    forward: ast.FunctionDef | None = None
    for stmt in model.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "forward":
            forward = stmt
            continue
        if (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            continue  # the class docstring
        members.append(_unparse(_RenameModel().visit(stmt)))
    if forward is None:
        raise SourceError("class Model has no forward method")
    if forward.args.vararg or forward.args.kwarg or forward.args.kwonlyargs:
        raise SourceError("Model.forward with *args, **kwargs or keyword-only parameters is not supported")
    params = [a.arg for a in forward.args.posonlyargs + forward.args.args][1:]
    signature = _unparse(forward.args)
    forward_copy = _RenameModel().visit(ast.parse(_unparse(forward)).body[0])
    return ProblemSource(
        imports=imports,
        prelude=prelude,
        class_members=members,
        forward_params=params,
        forward_signature=signature,
        forward_source=_unparse(forward_copy),
        top_level_names=names,
    )


def indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())
