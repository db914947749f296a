"""StitchCUDA: evals."""

from pathlib import Path


def suite_path() -> Path:
    """The built-in problem suite (KernelBench layout: level1/, level2/, level3/), shipped as package data."""
    return Path(__file__).resolve().parent / "suite"
