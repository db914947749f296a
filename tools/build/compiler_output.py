"""Compiler output: the first `error:` lines of nvcc/g++/ld output, a clean log tail, and BuildError.

Why: the coder acts on the compiler's first errors with file:line kept (`cuda_sources(12): error:
...`), not on ninja's echo of whole command lines or the build directory's temp paths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_ERRORS = 10
LOG_TAIL_CHARS = 4000

_ERROR_RE = re.compile(
    r"(\berror\b\s*:|\bfatal\b|undefined reference|undefined symbol|cannot find -l|multiple definition"
    r"|No such file or directory)",
    re.IGNORECASE,
)
_NOISE_RE = re.compile(
    r"^(\[\d+/\d+\]|FAILED:|ninja: |compilation terminated|In file included from|\s+from "
    r"|(\S*/)?(c\+\+|g\+\+|gcc|cc|clang\+*|nvcc|ccache|ld)\s+-)"  # echoed compiler command lines
)
_TORCH_PREFIX_RE = re.compile(r"^Error building extension '[^']*':\s*")


class BuildError(Exception):
    """An extension failed to compile, link or load; str() is one line naming the first error."""

    def __init__(self, name: str, errors: list[str], log_tail: str, seconds: float) -> None:
        self.name = name
        self.errors = errors
        self.log_tail = log_tail
        self.seconds = seconds
        first = errors[0] if errors else "see the build log"
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"building extension '{name}' failed: {first}{more}")


def clean_line(line: str, build_dirs: Sequence[str]) -> str:
    for d in build_dirs:
        if d:
            line = line.replace(d.rstrip("/") + "/", "")
    return line.strip()


def parse_compiler_errors(output: str, build_dirs: Sequence[str] = (), limit: int = MAX_ERRORS) -> list[str]:
    """The first distinct `error:` lines of nvcc/g++/ld output, with build-directory paths stripped."""
    errors: list[str] = []
    linker_summary: list[str] = []
    for raw in _TORCH_PREFIX_RE.sub("", output).splitlines():
        if _NOISE_RE.match(raw) or len(raw) > 2000:  # ninja's echo of whole compile commands
            continue
        line = clean_line(raw, build_dirs)
        if not line or not _ERROR_RE.search(line):
            continue
        if "ld returned" in line:
            linker_summary.append(line)  # a summary, kept only when nothing better was said
            continue
        if line not in errors:
            errors.append(line)
        if len(errors) >= limit:
            break
    return errors or linker_summary[:limit]


def log_tail(output: str, build_dirs: Sequence[str] = (), chars: int = LOG_TAIL_CHARS) -> str:
    """The end of a build log without ninja's command echo (whole compiler command lines)."""
    raw_lines = _TORCH_PREFIX_RE.sub("", output).splitlines()
    lines = [clean_line(raw, build_dirs) for raw in raw_lines if not _NOISE_RE.match(raw)]
    text = "\n".join(line for line in lines if line and len(line) <= 2000)
    return text[-chars:]
