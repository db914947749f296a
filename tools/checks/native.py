"""Rules for the native sources: what the C++/CUDA strings of a program start, call or switch on.

Why: the Python rules cannot see inside `load_inline`'s sources; these read them (comments
stripped) for threads and processes, persisting-L2 windows, context-level CUDA calls, lower
precision, and torch compute calls (at::/torch:: functions and tensor methods) in the binding.
"""

from __future__ import annotations

from tools.checks.program import Program, lines_text
from tools.checks.vocabulary import (
    COMPUTE_METHODS,
    NATIVE_NON_COMPUTE,
    NATIVE_RULES,
    NATIVE_TENSOR_METHOD_RE,
    NATIVE_TORCH_CALL_RE,
    NATIVE_TORCH_NN_RE,
    TORCH_HEADERS_RE,
)
from tools.protocol import Finding, finding
from tools.worker.kernel_names import strip_comments


def rule_native(program: Program) -> list[Finding]:
    found: list[Finding] = []
    ops: dict[str, list[int]] = {}
    for line, text in program.native:
        src = strip_comments(text)
        for id_, severity, pattern, why in NATIVE_RULES:
            match = pattern.search(src)
            if match:
                found.append(
                    finding(id_, severity, f"native source (string at line {line}): {match.group(0)}: {why}")
                )
        for m in NATIVE_TORCH_CALL_RE.finditer(src):
            if m.group(1) not in NATIVE_NON_COMPUTE:
                ops.setdefault(m.group(0).rstrip("( "), []).append(line)
        for m in NATIVE_TORCH_NN_RE.finditer(src):
            ops.setdefault(f"torch::nn::functional::{m.group(1)}", []).append(line)
        if TORCH_HEADERS_RE.search(src):
            for m in NATIVE_TENSOR_METHOD_RE.finditer(src):
                if m.group(1).rstrip("_") in COMPUTE_METHODS:
                    ops.setdefault(f"tensor .{m.group(1)}()", []).append(line)
    for op, lines in ops.items():
        found.append(
            finding(
                "torch_ops_in_cpp",
                "warning",
                f"{op} in the native source (string at {lines_text(lines)}): PyTorch does this work",
            )
        )
    return found
