"""Rules for tampering: a program that hides a fallback, reaches the reference or the harness, or cheats time.

Why: these are the tricks published systems were fooled by (docs/kernelbench.md): a try/except
that falls back to PyTorch, calling or inheriting the reference `Model`, threads and processes,
side streams never joined, patched timers or checks, precision switches, tensor subclasses,
answers cached by input pointer, frames and `gc` reaching into the harness. Each is an error.
"""

from __future__ import annotations

import ast

from tools.checks.program import Program, line_of, lines_text, qualname, snippet, target_leaves, walk_runtime
from tools.checks.vocabulary import (
    ATTRIBUTE_SETTERS,
    DISPATCH_MODES,
    DYNAMIC_CODE,
    ENVIRON_WRITERS,
    FRAME_ATTRS,
    GLOBAL_SETTING_CALLS,
    GRAPH_CALLS,
    HARNESS_PACKAGES,
    INTROSPECTION_CALLS,
    LOOKUP_METHODS,
    LOW_PRECISION_DTYPES,
    LOW_PRECISION_METHODS,
    MAP_FACTORIES,
    MEMOIZERS,
    MOCK_CALLS,
    MOCK_PREFIXES,
    NATIVE_JOIN_RE,
    NATIVE_STREAM_RE,
    OS_PROCESS_CALLS,
    PATCHABLE_MAPPINGS,
    PATCHABLE_ROOTS,
    PTR_ATTRS,
    PTR_FUNCTIONS,
    PTR_METHODS,
    STREAM_CALLS,
    STREAM_JOIN_METHODS,
    SUBCLASS_ATTRS,
    SUPPRESSORS,
    TENSOR_BASES,
    TF32_FLAGS,
    THREAD_MODULES,
    THREAD_ROOTS,
    TORCH_HOOKS,
)
from tools.protocol import Finding, finding
from tools.worker.kernel_names import strip_comments


def rule_try_except(program: Program) -> list[Finding]:
    found = []
    for node in ast.walk(program.tree):
        if isinstance(node, (ast.Try, ast.TryStar)):
            for handler in node.handlers:
                if handler.body and isinstance(handler.body[-1], ast.Raise):
                    continue  # re-raises (possibly after cleanup or with a better message)
                caught = snippet(handler.type) if handler.type is not None else "everything"
                found.append(
                    finding(
                        "try_except_fallback",
                        "error",
                        f"line {line_of(handler)}: except {caught} does not re-raise: a failure "
                        "can silently fall back to another implementation",
                    )
                )
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and qualname(call.func, program.aliases) in SUPPRESSORS:
                    found.append(
                        finding(
                            "try_except_fallback",
                            "error",
                            f"line {line_of(node)}: {snippet(call)} swallows errors",
                        )
                    )
    return found


def rule_reference_model(program: Program) -> list[Finding]:
    found = []
    lines = []
    for node in ast.walk(program.tree):
        named = (isinstance(node, ast.Name) and node.id == "Model") or (
            isinstance(node, ast.Attribute) and node.attr == "Model"
        )
        if named and isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
            lines.append(line_of(node))
    # Inheritance: ModelNew or any class in its base chain derives from Model.
    inherits = []
    for name, cls in program.classes.items():
        if _derives_from_model(cls, program, set()):
            inherits.append((name, line_of(cls)))
    for name, line in inherits:
        found.append(
            finding(
                "inherits_reference", "error", f"line {line}: class {name} derives from the reference Model"
            )
        )
    if lines:
        found.append(
            finding(
                "calls_reference_model",
                "error",
                f"{lines_text(lines)}: the program names the reference `Model` (it must not call, alias or "
                "inherit the reference)",
            )
        )
    return found


def _derives_from_model(cls: ast.ClassDef, program: Program, seen: set[str]) -> bool:
    for base in cls.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
        if name == "Model":
            return True
        if name and name in program.classes and name not in seen:
            seen.add(name)
            if _derives_from_model(program.classes[name], program, seen):
                return True
    return False


def rule_threads(program: Program) -> list[Finding]:
    found = []
    for node in ast.walk(program.tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for module in modules:
            if module in THREAD_MODULES or module.split(".")[0] in THREAD_ROOTS:
                found.append(
                    finding("threads_or_processes", "error", f"line {line_of(node)}: imports {module}")
                )
                break
        if isinstance(node, ast.Call):
            name = qualname(node.func, program.aliases) or ""
            if name.startswith("os.") and name.split(".", 1)[1] in OS_PROCESS_CALLS:
                found.append(finding("threads_or_processes", "error", f"line {line_of(node)}: calls {name}"))
    return found


def rule_streams(program: Program) -> list[Finding]:
    created = []
    joined = False
    graph = False
    for node in ast.walk(program.tree):
        if isinstance(node, ast.Call):
            name = qualname(node.func, program.aliases) or ""
            if name in STREAM_CALLS:
                created.append(f"line {line_of(node)}: {name}")
            if name == "torch.cuda.synchronize":
                joined = True
            elif name in GRAPH_CALLS:
                graph = True
            if isinstance(node.func, ast.Attribute) and node.func.attr in STREAM_JOIN_METHODS:
                joined = True
    for line, text in program.native:
        src = strip_comments(text)
        for m in NATIVE_STREAM_RE.finditer(src):
            created.append(f"native source (string at line {line}): {m.group(0)}")
        if NATIVE_JOIN_RE.search(src):
            joined = True
    found = []
    if graph:
        found.append(finding("cuda_graph", "info", "the program captures and replays CUDA graphs"))
    if created:
        evidence = "; ".join(created[:4])
        if joined:
            found.append(finding("stream_joined", "info", f"{evidence}; joined back to the caller's stream"))
        else:
            found.append(
                finding(
                    "unjoined_stream",
                    "error",
                    f"{evidence}; nothing joins it back, so work can escape the caller's stream and its timing",
                )
            )
    return found


def rule_patching(program: Program) -> list[Finding]:
    found = []

    def rooted(target: ast.AST) -> str | None:
        name = qualname(target, program.aliases)
        if name and "." in name and name.split(".")[0] in PATCHABLE_ROOTS:
            return name
        return None

    for node in ast.walk(program.tree):
        targets: list[ast.AST] = []
        value: ast.AST | None = None
        if isinstance(node, ast.Assign):
            targets, value = list(node.targets), node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            for leaf in target_leaves(target):
                name = rooted(leaf) if isinstance(leaf, ast.Attribute) else None
                if name is None and isinstance(leaf, ast.Subscript):
                    name = _subscript_root(leaf, program)
                if name is None:
                    continue
                found.extend(_classify_assignment(name, value, line_of(node)))
        if isinstance(node, ast.Call):
            fname = qualname(node.func, program.aliases) or ""
            if fname in ATTRIBUTE_SETTERS and node.args:
                obj = rooted(node.args[0]) or (qualname(node.args[0], program.aliases) or "")
                if obj.split(".")[0] in PATCHABLE_ROOTS:
                    attr = snippet(node.args[1]) if len(node.args) > 1 else "?"
                    found.append(
                        finding(
                            "patches_library", "error", f"line {line_of(node)}: {fname}({obj}, {attr}, ...)"
                        )
                    )
            if fname.startswith(MOCK_PREFIXES) or fname in MOCK_CALLS:
                found.append(finding("patches_library", "error", f"line {line_of(node)}: {fname}"))
            found.extend(_classify_call(fname, node, program))
    return found


def _subscript_root(node: ast.Subscript, program: Program) -> str | None:
    name = qualname(node.value, program.aliases) or ""
    return name if name in PATCHABLE_MAPPINGS else None


def _classify_assignment(name: str, value: ast.AST | None, line: int) -> list[Finding]:
    if name == "os.environ":
        return [finding("global_setting", "warning", f"line {line}: writes os.environ")]
    if name.startswith("torch.backends.") or name.startswith("torch._C._set"):
        flag = name.rsplit(".", 1)[-1]
        truthy = (
            isinstance(value, ast.Constant) and bool(value.value) and value.value not in ("ieee", "highest")
        )
        if flag in TF32_FLAGS[:2] and (truthy or not isinstance(value, ast.Constant)):
            return [finding("precision_switch", "error", f"line {line}: sets {name} (TF32 for fp32 math)")]
        return [finding("global_setting", "warning", f"line {line}: sets {name}, which the reference shares")]
    return [finding("patches_library", "error", f"line {line}: assigns {name}")]


def _classify_call(name: str, call: ast.Call, program: Program) -> list[Finding]:
    line = line_of(call)
    arg = call.args[0] if call.args else None
    highest = isinstance(arg, ast.Constant) and arg.value == "highest"
    if name == "torch.set_float32_matmul_precision" and not highest:
        return [finding("precision_switch", "error", f"line {line}: {snippet(call)}")]
    if name == "torch.set_default_dtype" and arg is not None:
        dtype = (qualname(arg, program.aliases) or "").rsplit(".", 1)[-1]
        if dtype in LOW_PRECISION_DTYPES:
            return [finding("precision_switch", "error", f"line {line}: {snippet(call)}")]
        return [finding("global_setting", "warning", f"line {line}: {snippet(call)}")]
    if name in GLOBAL_SETTING_CALLS:
        return [finding("global_setting", "warning", f"line {line}: {snippet(call)}")]
    if name.startswith("os.environ.") and name.rsplit(".", 1)[-1] in ENVIRON_WRITERS:
        return [finding("global_setting", "warning", f"line {line}: {snippet(call)}")]
    return []


def rule_precision(program: Program) -> list[Finding]:
    lines: dict[str, list[int]] = {}

    def note(what: str, node: ast.AST) -> None:
        lines.setdefault(what, []).append(line_of(node))

    for node in ast.walk(program.tree):
        if isinstance(node, ast.Call):
            name = qualname(node.func, program.aliases) or ""
            if (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in LOW_PRECISION_METHODS
                and not node.args
            ):
                note(f".{node.func.attr}()", node)
            if name.endswith("autocast") and ("amp" in name or name.startswith("torch.")):
                note(name, node)
            for value in list(node.args) + [k.value for k in node.keywords]:
                dtype = qualname(value, program.aliases) or ""
                if dtype.startswith("torch.") and dtype.split(".")[-1] in LOW_PRECISION_DTYPES:
                    note(dtype, node)
    found = [
        finding("precision_downgrade", "warning", f"{lines_text(where)}: {what} in an fp32 program")
        for what, where in lines.items()
    ]
    return found


def rule_subclass(program: Program) -> list[Finding]:
    found = []
    for node in ast.walk(program.tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = qualname(base, program.aliases) or ""
                if name in TENSOR_BASES or name.endswith(DISPATCH_MODES):
                    found.append(
                        finding(
                            "tensor_subclass", "error", f"line {line_of(node)}: class {node.name}({name})"
                        )
                    )
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in TORCH_HOOKS:
            found.append(finding("tensor_subclass", "error", f"line {line_of(node)}: defines {node.name}"))
        if isinstance(node, ast.Attribute) and node.attr in SUBCLASS_ATTRS:
            found.append(finding("tensor_subclass", "error", f"line {line_of(node)}: uses {node.attr}"))
    return found


def _has_ptr(node: ast.AST, tainted: set[str], program: Program) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            if isinstance(inner.func, ast.Attribute) and inner.func.attr in PTR_METHODS:
                return True
            if (qualname(inner.func, program.aliases) or "") in PTR_FUNCTIONS:
                return True
        if isinstance(inner, ast.Attribute) and inner.attr in PTR_ATTRS:
            return True
        if isinstance(inner, (ast.Name, ast.Attribute)) and snippet(inner) in tainted:
            return True
    return False


def rule_pointer_cache(program: Program) -> list[Finding]:
    """data_ptr/id values (or tensors themselves) used as keys, compared with stored state, or stored."""
    containers: set[str] = set()
    for node in ast.walk(program.tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            is_map = isinstance(value, ast.Dict) or (
                isinstance(value, ast.Call)
                and (qualname(value.func, program.aliases) or "").split(".")[-1] in MAP_FACTORIES
            )
            if is_map:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                containers.update(snippet(t) for t in targets)
    forward_params: set[str] = set()
    for fn in program.runtime:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == "forward":
            forward_params.update(a.arg for a in fn.args.args[1:])
    globals_: set[str] = set()
    for node in walk_runtime(program):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            globals_.update(node.names)
    tainted: set[str] = set()
    for _ in range(3):  # propagate through simple assignments
        for node in ast.walk(program.tree):
            if isinstance(node, ast.Assign) and _has_ptr(node.value, tainted, program):
                for target in node.targets:
                    for leaf in target_leaves(target):
                        tainted.add(snippet(leaf))
    found: list[Finding] = []

    def flag(node: ast.AST, why: str) -> None:
        found.append(finding("pointer_keyed_cache", "error", f"line {line_of(node)}: {why}: {snippet(node)}"))

    def is_key(expr: ast.AST) -> bool:
        if _has_ptr(expr, tainted, program):
            return True
        return isinstance(expr, ast.Name) and expr.id in forward_params

    for node in ast.walk(program.tree):
        if isinstance(node, ast.Subscript) and snippet(node.value) in containers and is_key(node.slice):
            flag(node, "a cache indexed by an input's pointer or identity")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                if any(snippet(s) in containers for s in sides[1:]) and is_key(node.left):
                    flag(node, "a membership test on an input's pointer or identity")
            elif any(_has_ptr(s, tainted, program) for s in sides) and any(
                _is_state(s, program, globals_) for s in sides
            ):
                flag(node, "an input pointer compared with remembered state")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LOOKUP_METHODS
            and node.args
            and snippet(node.func.value) in containers
            and is_key(node.args[0])
        ):
            flag(node, "a cache lookup by an input's pointer or identity")
        elif isinstance(node, ast.Assign) and _has_ptr(node.value, set(), program):
            for target in node.targets:
                for leaf in target_leaves(target):
                    if _is_state(leaf, program, globals_):
                        flag(node, "an input pointer kept across calls")
    for fn in program.runtime:
        for deco in getattr(fn, "decorator_list", []):
            target = deco.func if isinstance(deco, ast.Call) else deco
            if (qualname(target, program.aliases) or "").split(".")[-1] in MEMOIZERS:
                found.append(
                    finding(
                        "memoization",
                        "warning",
                        f"line {line_of(fn)}: {getattr(fn, 'name', 'lambda')} is memoized ({snippet(deco)})",
                    )
                )
    return found


def _is_state(node: ast.AST, program: Program, globals_: set[str]) -> bool:
    """An expression naming state that outlives one call: self.<attr> or a declared global."""
    text = snippet(node)
    if isinstance(node, ast.Attribute) and text.startswith("self."):
        return True
    return isinstance(node, ast.Name) and node.id in globals_


def rule_introspection(program: Program) -> list[Finding]:
    found = []
    for node in ast.walk(program.tree):
        if isinstance(node, ast.Call):
            name = qualname(node.func, program.aliases) or ""
            if name in INTROSPECTION_CALLS:
                found.append(finding("harness_introspection", "error", f"line {line_of(node)}: calls {name}"))
            elif name in DYNAMIC_CODE:
                found.append(finding("dynamic_code", "error", f"line {line_of(node)}: calls {name}"))
        elif isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRS:
            found.append(
                finding("harness_introspection", "error", f"line {line_of(node)}: reads .{node.attr}")
            )
        elif isinstance(node, ast.Attribute) and qualname(node, program.aliases) == "sys.modules":
            found.append(finding("harness_modules", "warning", f"line {line_of(node)}: reads sys.modules"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name == "__main__":
                    found.append(
                        finding("harness_introspection", "error", f"line {line_of(node)}: imports __main__")
                    )
                elif name.split(".")[0] == "ctypes":
                    found.append(finding("ctypes", "warning", f"line {line_of(node)}: imports ctypes"))
                elif name.split(".")[0] in HARNESS_PACKAGES:
                    found.append(
                        finding(
                            "harness_introspection",
                            "error",
                            f"line {line_of(node)}: imports the harness ({name})",
                        )
                    )
    return found
