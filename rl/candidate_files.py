"""The candidate program files of tests/candidates: a candidate's whole source and its expectation.

Why here, standard library only: the anti-hacking table (rl/anti_hacking.py) scores these files, and
the hack-check tests run them on the CPU and on the GPU machine (which lacks the graph's packages);
one reader serves both. A cheat that shares the ~100-line extension of others names it in a
`# harness-base: <path> (...)` line, which `candidate_source` replaces by that file's text; its
`# harness-expect: key=value ...` line says what the checks must find.
"""

from __future__ import annotations

import re
from pathlib import Path

_BASE_LINE = re.compile(r"^# harness-base: (\S+).*\n", re.MULTILINE)
_EXPECT_LINE = re.compile(r"^# harness-expect: (.*)$", re.MULTILINE)


def candidate_source(path: Path) -> str:
    """The candidate's whole program: its `# harness-base:` line replaced by that file's text."""
    text = path.read_text()
    match = _BASE_LINE.search(text)
    if match is None:
        return text
    base = (path.parent / match.group(1)).read_text()
    return text[: match.start()] + base + text[match.end() :]


def expectation(path: Path) -> dict[str, str]:
    """The candidate's `# harness-expect: key=value ...` line as a dict (empty without one)."""
    match = _EXPECT_LINE.search(path.read_text())
    return dict(item.split("=", 1) for item in match.group(1).split() if "=" in item) if match else {}
