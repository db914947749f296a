"""Rules for where the work happens: custom kernels built and used, PyTorch ops left in, outputs not computed.

Why: a program may be honest and still leave most of its work to PyTorch (each op left in runtime
code is one `pytorch_fallback` warning, with its lines), build an extension it never calls, or
return memory nothing wrote, a constant, or state kept from an earlier call.
"""

from __future__ import annotations

import ast

from tools.checks.program import Program, is_builder, line_of, lines_text, qualname, snippet, walk_runtime
from tools.checks.vocabulary import (
    BUILDERS,
    COMPUTE_METHODS,
    CONSTANT_ALLOCATORS,
    EMPTY_ALLOCATORS,
    EMPTY_METHODS,
    F_NON_COMPUTE,
    NN_CONTAINERS,
    NN_NON_COMPUTE,
    NON_TENSOR_RECEIVERS,
    NON_WRITING_INPLACE,
    TORCH_COMPUTE_NAMESPACES,
    TORCH_NON_COMPUTE,
    TORCH_NON_COMPUTE_NAMESPACES,
)
from tools.protocol import Finding, finding
from tools.worker.kernel_names import kernel_names

TF32_FORWARD = "_stitch_forward_tf32"  # the generated programs' TF32-matched forward


def rule_kernels(program: Program) -> list[Finding]:
    """Which custom kernels the program defines, whether its extensions are used, or none at all."""
    found: list[Finding] = []
    sources = [text for _, text in program.native]
    kernels = kernel_names(sources)
    helpers = program.builders
    ext_names: dict[str, int] = {}
    builds = 0
    decorated = False
    for node in ast.walk(program.tree):
        if isinstance(node, ast.Call) and is_builder(node, program, helpers):
            builds += 1
            parent = program.parents.get(node)
            registers_ops = any(  # is_python_module=False: the ops are reached through torch.ops
                k.arg == "is_python_module" and isinstance(k.value, ast.Constant) and not k.value.value
                for k in node.keywords
            )
            if isinstance(parent, ast.Assign) and not registers_ops:
                for target in parent.targets:
                    key = snippet(target)
                    ext_names[key] = line_of(parent)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if (qualname(target, program.aliases) or "") in BUILDERS:
                    decorated = True
    for name, line in ext_names.items():
        if not _used_elsewhere(program, name, line):
            found.append(
                finding(
                    "kernel_never_called",
                    "error",
                    f"line {line}: the extension bound to {name} is built but never used, so its kernels cannot run",
                )
            )
    if kernels:
        found.append(finding("custom_kernels", "info", f"__global__ kernels: {', '.join(kernels[:12])}"))
    elif builds and sources:
        found.append(
            finding("cpp_only_extension", "info", "the extension has no __global__ kernel (C++ only)")
        )
    has_custom = bool(kernels) or decorated or (builds > 0 and bool(sources))
    if not has_custom:
        found.append(
            finding(
                "no_custom_kernel",
                "warning",
                "no custom kernel (no __global__ source and no extension build): every op runs in PyTorch",
            )
        )
    return found


def _used_elsewhere(program: Program, name: str, assigned_line: int) -> bool:
    """True when the expression text `name` is read anywhere but its own assignment line."""
    for node in ast.walk(program.tree):
        read = isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load)
        if read and snippet(node) == name and line_of(node) != assigned_line:
            return True
    return False


def _module_attributes(program: Program) -> dict[str, str]:
    """self.<attr> -> nn class name for attributes assigned nn.<Layer>(...) in __init__."""
    layers: dict[str, str] = {}
    for node in ast.walk(program.tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Assign) and isinstance(inner.value, ast.Call):
                    cls = qualname(inner.value.func, program.aliases) or ""
                    if cls.startswith("torch.nn.") and cls.count(".") == 2:
                        short = cls.rsplit(".", 1)[-1]
                        if short[:1].isupper() and short not in NN_NON_COMPUTE or short in NN_CONTAINERS:
                            for target in inner.targets:
                                text = snippet(target)
                                if text.startswith("self."):
                                    layers[text] = short
    return layers


def rule_fallbacks(program: Program) -> list[Finding]:
    """PyTorch compute ops in runtime code, one finding per op with its lines."""
    ops: dict[str, list[int]] = {}
    matched: dict[str, list[int]] = {}
    layers = _module_attributes(program)
    loop_vars: dict[str, str] = {}
    for node in walk_runtime(program):
        if isinstance(node, ast.For) and snippet(node.iter) in layers and isinstance(node.target, ast.Name):
            loop_vars[node.target.id] = layers[snippet(node.iter)]
    for node in walk_runtime(program):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            ops.setdefault("@ (matmul)", []).append(line_of(node))
        if not isinstance(node, ast.Call):
            continue
        name = qualname(node.func, program.aliases) or ""
        text = snippet(node.func)
        op: str | None = None
        if text in layers:
            op = f"nn.{layers[text]} ({text})"
        elif isinstance(node.func, ast.Name) and node.func.id in loop_vars:
            op = f"nn.{loop_vars[node.func.id]} (loop over a container)"
        elif name.startswith("torch.nn.functional."):
            short = name.rsplit(".", 1)[-1]
            if short not in F_NON_COMPUTE:
                op = f"F.{short}"
        elif name.startswith("torch.ops.aten."):
            op = f"torch.ops.aten.{name.split('.')[3]}"
        elif name == "torch.compile":
            op = "torch.compile"
        elif name.startswith("torch.nn.") and name.count(".") == 2:
            short = name.rsplit(".", 1)[-1]
            parent = program.parents.get(node)
            if isinstance(parent, ast.Call) and parent.func is node and short not in NN_NON_COMPUTE:
                op = f"nn.{short} (constructed and called)"
        elif name.startswith("torch.") and not name.startswith(TORCH_NON_COMPUTE_NAMESPACES):
            short = name.split(".")[-1]
            top_level = name.count(".") == 1 and short not in TORCH_NON_COMPUTE
            namespaced = name.startswith(TORCH_COMPUTE_NAMESPACES)
            tensor_method = name.startswith("torch.Tensor.") and short.rstrip("_") in COMPUTE_METHODS
            if top_level or namespaced or tensor_method:
                op = name
        elif isinstance(node.func, ast.Attribute) and node.func.attr.rstrip("_") in COMPUTE_METHODS:
            base = qualname(node.func.value, program.aliases) or ""
            receiver = snippet(node.func.value)
            bookkeeping = receiver.endswith("num_batches_tracked")  # BatchNorm's step counter
            library = base.split(".")[0] in NON_TENSOR_RECEIVERS
            if not (library or bookkeeping or receiver in program.extensions):
                op = f".{node.func.attr}()"
        if op:
            (matched if _in_tf32_forward(program, node) else ops).setdefault(op, []).append(line_of(node))
    found = [
        finding(
            "pytorch_fallback",
            "warning",
            f"{op} at {lines_text(lines)} ({len(lines)} call{'s' if len(lines) > 1 else ''}): PyTorch does this work",
        )
        for op, lines in ops.items()
    ]
    if matched:
        ops_text = ", ".join(f"{op} at {lines_text(lines)}" for op, lines in matched.items())
        found.append(
            finding(
                "tf32_reference_path",
                "info",
                f"{TF32_FORWARD}, taken only while cuDNN TF32 is allowed, keeps the reference's calls: {ops_text}",
            )
        )
    return found


def _in_tf32_forward(program: Program, node: ast.AST) -> bool:
    """Inside the method a program runs only while cuDNN TF32 is on (codegen/schedule/precision.py)?

    Its PyTorch calls keep the reference's rounding there; whether the timed path does its own work
    is what the warnings above and the profiler's coverage judge, and that path is the other one.
    """
    parent = program.parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.FunctionDef) and parent.name == TF32_FORWARD:
            return _tf32_forward_is_guarded(program)
        parent = program.parents.get(parent)
    return False


def _tf32_forward_is_guarded(program: Program) -> bool:
    """Every call of the TF32 forward sits under `if torch.backends.cudnn.allow_tf32:` (else it is
    just another forward, and its PyTorch calls count as fallbacks)."""
    calls = [
        node
        for node in ast.walk(program.tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == TF32_FORWARD
    ]
    for call in calls:
        parent = program.parents.get(call)
        while parent is not None and not (
            isinstance(parent, ast.If) and snippet(parent.test) == "torch.backends.cudnn.allow_tf32"
        ):
            parent = program.parents.get(parent)
        if parent is None:
            return False
    return bool(calls)


def rule_outputs(program: Program) -> list[Finding]:
    """Uninitialised, constant or stateful outputs and in-place writes to inputs, in forward."""
    found: list[Finding] = []
    for fn in program.runtime:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = {a.arg for a in fn.args.args[1:]} if fn.name == "forward" else set()
        empties: dict[str, int] = {}
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and _is_empty_alloc(node.value, program)
            ):
                empties[node.targets[0].id] = line_of(node)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for value in values:
                if _is_empty_alloc(value, program):
                    found.append(
                        finding(
                            "uninitialized_output", "error", f"line {line_of(node)}: returns {snippet(value)}"
                        )
                    )
                elif (
                    isinstance(value, ast.Name)
                    and value.id in empties
                    and not _written(fn, value.id, program)
                ):
                    found.append(
                        finding(
                            "uninitialized_output",
                            "error",
                            f"line {line_of(node)}: returns {value.id} from torch.empty (line {empties[value.id]}) "
                            "that nothing writes: it holds whatever memory it got",
                        )
                    )
                elif fn.name == "forward" and isinstance(value, ast.Call):
                    name = qualname(value.func, program.aliases) or ""
                    if name in CONSTANT_ALLOCATORS:
                        found.append(
                            finding(
                                "constant_output",
                                "warning",
                                f"line {line_of(node)}: returns {snippet(value)}",
                            )
                        )
                elif (
                    fn.name == "forward"
                    and isinstance(value, ast.Attribute)
                    and snippet(value).startswith("self.")
                ):
                    found.append(
                        finding(
                            "stateful_output",
                            "warning",
                            f"line {line_of(node)}: returns {snippet(value)}, state kept across calls",
                        )
                    )
        if params:
            found.extend(_input_mutations(fn, params))
    return found


def _is_empty_alloc(node: ast.AST, program: Program) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = qualname(node.func, program.aliases) or ""
    return name in EMPTY_ALLOCATORS or (
        isinstance(node.func, ast.Attribute) and node.func.attr in EMPTY_METHODS
    )


def _written(fn: ast.AST, name: str, program: Program) -> bool:
    """Whether `name` is used anywhere besides being assigned and returned (a call argument, .data_ptr(), ...)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            parent = program.parents.get(node)
            if isinstance(parent, ast.Tuple):
                parent = program.parents.get(parent)
            if isinstance(parent, ast.Return):
                continue
            return True
        if (
            isinstance(node, (ast.Subscript, ast.Attribute))
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == name
        ):
            return True
    return False


def _input_mutations(fn: ast.AST, params: set[str]) -> list[Finding]:
    found = []
    for node in ast.walk(fn):
        target = None
        what = ""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr.endswith("_") and not attr.startswith("_") and attr not in NON_WRITING_INPLACE:
                target, what = node.func.value, f".{attr}()"
        elif isinstance(node, ast.AugAssign):
            target, what = node.target, "augmented assignment"
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) or (isinstance(t, ast.Attribute) and t.attr == "data"):
                    target, what = t.value, "item or .data assignment"
        if isinstance(target, ast.Name) and target.id in params:
            found.append(
                finding(
                    "mutates_inputs",
                    "warning",
                    f"line {line_of(node)}: {what} writes input {target.id} in place",
                )
            )
    return found
