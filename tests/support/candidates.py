"""The test candidates (tests/candidates/): where they live, and their declared expectation.

The file format (a `# harness-base:` line splicing in a shared extension, a `# harness-expect:`
line) is read by rl/candidate_files.py, which the anti-hacking table uses too.
"""

from __future__ import annotations

from pathlib import Path

from rl.candidate_files import candidate_source as candidate_source
from rl.candidate_files import expectation as declared_expectation

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


def expectation(path: Path) -> dict[str, str]:
    """The candidate's `# harness-expect: key=value ...` line as a dict; every test candidate has one."""
    declared = declared_expectation(path)
    assert declared, f"{path.name} declares no expectation"
    return declared
