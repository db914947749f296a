"""`stitchcuda check`: the hack checks of one candidate program, static and (with a GPU) dynamic.

Why a module of its own: it reads a candidate and its problem and asks tools/checks and the
evaluation worker for findings; it shares nothing with the graph run but the exit codes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from graph.cli_common import EXIT_BAD_INPUT, EXIT_FAILED

if TYPE_CHECKING:
    from tools.protocol import Finding


def add_check_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="hack checks of a candidate program: static (source) and dynamic (strict run on a GPU)",
        description="Print {verdict, findings, operator_coverage} as JSON. Verdict: hacked (any error "
        "finding), suspicious (any warning, e.g. PyTorch fallbacks), else clean. Exit codes: 0 clean, "
        "1 suspicious or hacked, 2 bad input. Without a GPU only the static part runs (a finding says so).",
    )
    p.add_argument("solution", help="the candidate program (defines ModelNew)")
    p.add_argument("--problem", required=True, help="its KernelBench-format reference problem")
    p.add_argument("--static-only", action="store_true", help="only the static checks (no build, no GPU)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds for the dynamic run")
    p.add_argument("--arch", default=None, help="CUDA architecture to build for (default: the GPU's)")
    p.add_argument("--perf-trials", type=int, default=30, help="timed calls in the dynamic run")
    p.add_argument("--sol-ms", type=float, default=None, help="speed-of-light floor of the problem, in ms")
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    """Static findings always; dynamic ones from a strict worker run when a GPU is here."""
    from tools import checks

    texts = {}
    for label, path in (("solution", args.solution), ("problem", args.problem)):
        try:
            texts[label] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"stitchcuda: {label} {path}: cannot be read ({exc})", file=sys.stderr)
            return EXIT_BAD_INPUT
    dynamic: list[Finding] = []
    coverage = None
    if not args.static_only:
        dynamic, coverage = _dynamic_findings(args, texts["problem"], texts["solution"])
    report = checks.hack_report(texts["solution"], dynamic)
    verdict = report["verdict"]
    print(
        json.dumps(
            {"verdict": verdict, "findings": report["findings"], "operator_coverage": coverage}, indent=2
        )
    )
    return 0 if verdict == "clean" else EXIT_FAILED


def _dynamic_findings(
    args: argparse.Namespace, problem: str, solution: str
) -> tuple[list[Finding], float | None]:
    import torch

    from tools.checks import finding

    if not torch.cuda.is_available():
        note = "the dynamic checks need a GPU (torch.cuda.is_available() is False); the verdict is the static one"
        return [finding("dynamic_checks_skipped", "info", note)], None
    from tools.evaluate import evaluate
    from tools.protocol import EvalRequest

    request = EvalRequest(
        action="verify",
        problem_name=Path(args.problem).stem,
        problem_source=problem,
        candidate_source=solution,
        device="cuda",
        mode="strict",
        dynamic_checks=True,
        perf_trials=args.perf_trials,
        timeout_s=args.timeout,
    )
    if args.arch:
        request["arch"] = args.arch
    if args.sol_ms:
        request["sol_ms"] = args.sol_ms
    response = evaluate(request, timeout_s=args.timeout)
    found: list[Finding] = list(response.get("findings") or [])
    status = response.get("status", "crashed")
    first_line = (response.get("message") or status).splitlines()[0]
    if status == "wrong_output" and not any(f.get("severity") == "error" for f in found):
        found.append(finding("fails_strict_check", "error", first_line))
    elif status not in ("passed", "wrong_output") and not any(f.get("severity") == "error" for f in found):
        found.append(finding("dynamic_run_failed", "warning", f"{status}: {first_line}"))
    elif status == "passed":
        found.append(finding("strict_run", "info", first_line))
    return found, response.get("operator_coverage")
