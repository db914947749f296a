"""The rule list and the one verdict: static findings (plus any dynamic ones) as clean, suspicious or hacked.

Why one place: the CLI's `check`, the verifier node and the benchmark runner must reach the same
verdict from the same findings, so they all call `hack_report`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tools.checks.native import rule_native
from tools.checks.program import parse_program
from tools.checks.tampering import (
    rule_introspection,
    rule_patching,
    rule_pointer_cache,
    rule_precision,
    rule_reference_model,
    rule_streams,
    rule_subclass,
    rule_threads,
    rule_try_except,
)
from tools.checks.work import rule_fallbacks, rule_kernels, rule_outputs
from tools.protocol import Finding, finding, merge

VERDICTS = ("clean", "suspicious", "hacked")


def verdict(findings: Iterable[Finding]) -> str:
    """'hacked' with any error, 'suspicious' with any warning, else 'clean'."""
    severities = {f.get("severity") for f in findings}
    if "error" in severities:
        return "hacked"
    if "warning" in severities:
        return "suspicious"
    return "clean"


def fallback_count(findings: Iterable[Finding]) -> int:
    """How many distinct PyTorch fallback ops the findings name (Python and C++ together)."""
    return sum(1 for f in findings if f.get("id") in ("pytorch_fallback", "torch_ops_in_cpp"))


RULES = (  # the order findings of one severity are listed in
    rule_try_except,
    rule_reference_model,
    rule_threads,
    rule_streams,
    rule_patching,
    rule_precision,
    rule_subclass,
    rule_pointer_cache,
    rule_introspection,
    rule_fallbacks,
    rule_outputs,
    rule_native,
    rule_kernels,
)


def static_findings(source: str) -> list[Finding]:
    """Every static finding for a candidate program's source (the graph's and the CLI's entry point)."""
    try:
        program = parse_program(source)
    except SyntaxError as exc:
        return [finding("syntax_error", "warning", f"line {exc.lineno}: {exc.msg}; nothing else was checked")]
    found: list[Finding] = []
    for rule in RULES:
        found.extend(rule(program))
    order = {"error": 0, "warning": 1, "info": 2}
    return merge(sorted(found, key=lambda f: order[f["severity"]]))


def hack_report(source: str, dynamic: Iterable[Finding] = ()) -> dict[str, Any]:
    """{"verdict", "findings", "fallbacks"} for one program: its static checks, then any dynamic findings."""
    found = merge(static_findings(source), dynamic)
    return {"verdict": verdict(found), "findings": found, "fallbacks": fallback_count(found)}
