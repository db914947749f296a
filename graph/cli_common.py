"""What every `stitchcuda` subcommand shares: the exit codes and the --sandbox flag.

Why a module of its own: `run` (graph/cli.py), `eval` (graph/cli_eval.py) and `check`
(graph/cli_check.py) live in separate modules and must agree on these without importing each other.
"""

from __future__ import annotations

import argparse
import sys

EXIT_VERIFIED = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNVERIFIED = 3
EXIT_CODES = {"verified": EXIT_VERIFIED, "failed": EXIT_FAILED, "unverified": EXIT_UNVERIFIED}


def add_sandbox_flag(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument(
        "--sandbox",
        default=default,
        choices=["auto", "required", "off"],
        help="where generated and reference code runs (docs/sandbox.md): auto (default: the strongest layers "
        "this machine allows), required (fail when one is missing), off (debugging only)",
    )


def use_sandbox(mode: str | None) -> bool:
    """Check the mode against this machine and hand it to every child (baselines, profilers); False
    (after saying why) when `required` meets a missing layer."""
    import os

    from tools.sandbox import SandboxError, platform_layers

    if mode is None:
        return True
    try:
        platform_layers(mode)
    except SandboxError as exc:
        print(f"stitchcuda: {exc}", file=sys.stderr)
        return False
    os.environ["STITCHCUDA_SANDBOX"] = mode
    return True
