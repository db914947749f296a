"""Kernel names: the `__global__` functions a native source declares, and a profiler's name for one.

Why one module: the build records which kernels a candidate compiled (read from its CUDA sources),
and every profiler (torch's, Nsight Compute, Nsight Systems) reports a demangled signature; both
sides must agree on the bare name to tell the program's own kernels from PyTorch's. The static
checks read the same sources. Standard library only, so tools.checks can import it without torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_C_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_GLOBAL_RE = re.compile(r"__global__")
_NAME_CALL_RE = re.compile(r"([A-Za-z_]\w*)\s*\(")
_NOT_KERNEL_NAMES = {
    "__launch_bounds__",
    "__cluster_dims__",
    "__maxnreg__",
    "__align__",
    "alignas",
    "__declspec",
}
_ANON = re.compile(r"\(anonymous namespace\)::|<unnamed>::")


def strip_comments(text: str) -> str:
    """Native source without comments (so a comment saying 'no TF32' does not count); strings stay (asm)."""
    return _C_COMMENT_RE.sub(" ", text)


def kernel_names(sources: Iterable[str]) -> list[str]:
    """Names of the __global__ functions in native sources (comments ignored)."""
    names: list[str] = []
    for raw in sources:
        src = strip_comments(raw)
        for hit in _GLOBAL_RE.finditer(src):
            for m in _NAME_CALL_RE.finditer(src, hit.end(), min(len(src), hit.end() + 400)):
                if m.group(1) not in _NOT_KERNEL_NAMES:
                    if m.group(1) not in names:
                        names.append(m.group(1))
                    break
    return names


def base_name(name: str) -> str:
    """'void ns::relu_f4<float>(float const*, ...)' -> 'relu_f4': the name `__global__` declared."""
    text = _ANON.sub("", name).strip()
    if text.startswith("void "):
        text = text[len("void ") :]
    depth = 0
    for i, ch in enumerate(text):
        if ch in "<(" and depth == 0:
            text = text[:i]
            break
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
    return text.split("::")[-1].strip()
