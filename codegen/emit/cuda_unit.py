"""Collects a program's CUDA code and writes its pybind11 binding.

Sections are deduplicated by content (an unrolled loop's identical steps share one kernel) and each
is preceded by a `// group g3 g7` marker, so a compiler error's line number maps back to the fusion
groups that own the code (see `locate_groups`). Library code from codegen/emit/templates carries
`// lib <name>` markers the same way.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

TEMPLATE_DIR = Path(__file__).parent / "templates"
LIB_ORDER = (
    "common",
    "elementwise",
    "softmax",
    "layernorm",
    "reduce",
    "axis",
    "scan",
    "batchnorm",
    "gemm",
    "conv_dw",
    "conv_engine",
    "conv",
    "pool",
    "groupnorm",
    "rnn",
    "attention",
    "layout",
)
NAME_PLACEHOLDER = "@NAME@"
_MARKER = re.compile(r"^\s*//\s*(group|lib)\s+(.+?)\s*(?::.*)?$")


@dataclass
class Launcher:
    """An `extern "C" int name(params..., cudaStream_t)` function the binding exposes as `name`."""

    name: str
    params: list[tuple[str, str]]  # (C type, name), without the trailing stream
    groups: list[str] = field(default_factory=list)
    result: str = ""  # C type of an out-parameter before the stream, returned to Python (e.g. a size)

    def prototype(self) -> str:
        params = ", ".join(f"{ctype} {name}" for ctype, name in self.params)
        if self.result:
            params += f", {self.result}* result"
        return f'extern "C" int stitch_{self.name}({params}, cudaStream_t stream);'


@dataclass
class _Section:
    code: str
    groups: list[str]


def lib_source(name: str) -> str:
    return (TEMPLATE_DIR / f"{name}.cuh").read_text()


class CudaUnit:
    """The CUDA_SRC of one program plus the launchers its binding exposes."""

    def __init__(self) -> None:
        self.libs: set[str] = set()
        self._sections: dict[str, _Section] = {}
        self.launchers: dict[str, Launcher] = {}

    def use(self, *libs: str) -> None:
        for lib in libs:
            if lib not in LIB_ORDER:
                raise ValueError(f"unknown CUDA template library {lib!r}")
            self.libs.add(lib)
        self.libs.add("common")

    def define(self, prefix: str, template: str, group: str) -> str:
        """Add code whose name is derived from its content; returns that name."""
        digest = hashlib.sha1(template.encode()).hexdigest()[:10]
        name = f"{prefix}_{digest}"
        section = self._sections.get(name)
        if section is None:
            self._sections[name] = _Section(template.replace(NAME_PLACEHOLDER, name), [group])
        elif group not in section.groups:
            section.groups.append(group)
        return name

    def launcher(
        self, prefix: str, params: list[tuple[str, str]], body_template: str, group: str, result: str = ""
    ) -> str:
        """Define `extern "C" int stitch_<name>(params, stream) { body }` and register it for binding;
        with `result` (a C type) the body also gets `result* result`, which Python receives."""
        signature = ", ".join(f"{ctype} {pname}" for ctype, pname in params)
        if result:
            signature += f", {result}* result"
        template = f'extern "C" int stitch_{NAME_PLACEHOLDER}({signature}, cudaStream_t stream) {{\n{body_template}\n}}\n'
        name = self.define(prefix, template, group)
        if name not in self.launchers:
            self.launchers[name] = Launcher(name=name, params=list(params), result=result)
        if group not in self.launchers[name].groups:
            self.launchers[name].groups.append(group)
        return name

    def library_launcher(
        self, name: str, params: list[tuple[str, str]], group: str, result: str = ""
    ) -> None:
        """Expose an `extern "C"` launcher that lives in a template library (gemm, batchnorm, conv)."""
        launcher = self.launchers.setdefault(name, Launcher(name=name, params=list(params), result=result))
        if group not in launcher.groups:
            launcher.groups.append(group)

    @property
    def empty(self) -> bool:
        return not self.launchers

    def cuda_source(self) -> str:
        parts = ["// StitchCUDA kernels: torch-free, CUDA runtime (+ cuBLASLt) only."]
        for lib in LIB_ORDER:
            if lib in self.libs:
                parts.append(lib_source(lib).rstrip())
        for section in self._sections.values():
            parts.append(f"// group {' '.join(section.groups)}\n{section.code.rstrip()}")
        return "\n\n".join(parts) + "\n"

    def cpp_source(self) -> str:
        lines = [
            "// StitchCUDA binding: pybind11 only (no torch headers); pointers arrive as integers.",
            "#include <pybind11/pybind11.h>",
            "#include <cuda_runtime.h>",
            "#include <cstdint>",
            "#include <stdexcept>",
            "#include <string>",
            "",
            "static void stitch_check(int err, const char* what) {",
            "  if (err == 0) return;",
            '  std::string message = std::string(what) + " failed: ";',
            "  if (err >= 20000) {",
            '    message += "cuDNN status " + std::to_string(err - 20000) + " (cudnnStatus_t)";',
            "  } else if (err >= 10000) {",
            '    message += "cuBLAS status " + std::to_string(err - 10000);',
            "  } else {",
            "    message += cudaGetErrorString(static_cast<cudaError_t>(err));",
            "  }",
            "  throw std::runtime_error(message);",
            "}",
            "",
        ]
        defs: list[str] = []
        for launcher in self.launchers.values():
            where = f"stitch group {' '.join(launcher.groups)} ({launcher.name})"
            lines.append(f"// group {' '.join(launcher.groups)}")
            lines.append(launcher.prototype())
            py_params = [_py_param(ctype, pname) for ctype, pname in launcher.params]
            args = [_cast(ctype, pname) for ctype, pname in launcher.params]
            signature = ", ".join(py_params + ["std::uintptr_t stream"])
            if launcher.result:
                args.append("&result")
            call_args = ", ".join(args + ["reinterpret_cast<cudaStream_t>(stream)"])
            lines.append(f"static {launcher.result or 'void'} py_{launcher.name}({signature}) {{")
            if launcher.result:
                lines.append(f"  {launcher.result} result = 0;")
            lines.append(f'  stitch_check(stitch_{launcher.name}({call_args}), "{where}");')
            if launcher.result:
                lines.append("  return result;")
            lines.append("}")
            defs.append(f'  m.def("{launcher.name}", &py_{launcher.name});')
        lines.append("")
        lines.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        lines.extend(defs)
        lines.append("}")
        return "\n".join(lines) + "\n"


def _py_param(ctype: str, name: str) -> str:
    if ctype.endswith("*"):
        return f"std::uintptr_t {name}"
    if ctype == "float":
        return f"double {name}"
    return f"{ctype} {name}"


def _cast(ctype: str, name: str) -> str:
    if ctype.endswith("*"):
        return f"reinterpret_cast<{ctype}>({name})"
    if ctype == "float":
        return f"static_cast<float>({name})"
    return name


def locate_groups(source: str, line: int) -> tuple[str, list[str]] | None:
    """The ('group'|'lib', names) marker that owns 1-based `line` of a generated source."""
    lines = source.splitlines()
    for i in range(min(line, len(lines)) - 1, -1, -1):
        match = _MARKER.match(lines[i])
        if match:
            return match.group(1), match.group(2).split()
    return None
