"""The test candidates (tests/candidates/): a candidate's full source and its declared expectation.

Why a loader: a candidate is one self-contained program (the worker executes it as a string), but
several cheats share the same ~100-line extension and differ only in `forward`. Such a candidate
names the shared part in a `# harness-base: <path> (...)` line, and `candidate_source` puts that
file's text in place of the line: the program the worker, the static checks and the CLI see.
"""

from __future__ import annotations

import re
from pathlib import Path

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
_BASE_LINE = re.compile(r"^# harness-base: (\S+).*\n", re.M)
_EXPECT_LINE = re.compile(r"^# harness-expect: (.*)$", re.M)


def candidate_source(path: Path) -> str:
    """The candidate's program, with its `# harness-base:` line replaced by that file's text."""
    text = path.read_text()
    match = _BASE_LINE.search(text)
    if match is None:
        return text
    base = (path.parent / match.group(1)).read_text()
    return text[: match.start()] + base + text[match.end() :]


def expectation(path: Path) -> dict[str, str]:
    """The candidate's `# harness-expect: key=value ...` line as a dict."""
    match = _EXPECT_LINE.search(path.read_text())
    assert match, f"{path.name} declares no expectation"
    return dict(item.split("=", 1) for item in match.group(1).split())
