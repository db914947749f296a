"""Strict and KernelBench-identical verdicts side by side: one suite evaluated under each harness.

    python -m evals.benchmarks.harnesses STRICT/results.jsonl KERNELBENCH/results.jsonl

Why: users compare systems by KernelBench's numbers, and our strict harness checks more than
KernelBench's (docs/kernelbench.md). Issue 17 asks for one suite run in `kernelbench` mode beside a
strict one: per problem the two verdicts and speedups over eager, and where they disagree. This
prints that table (problems where the verdicts differ first) and the counts; the exit code is 0 when
every problem both runs recorded has the same verdict. Standard library only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.benchmarks.agreement import read_records

VERIFIED = "verified"


def _speedup(record: dict[str, Any]) -> str:
    value = record.get("speedup_vs_eager")
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "-"


def rows(strict: dict[str, dict[str, Any]], kernelbench: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per problem recorded by both runs: status and speedup under each harness; disagreements first."""
    out = []
    for key in sorted(set(strict) & set(kernelbench)):
        a, b = strict[key], kernelbench[key]
        out.append(
            {
                "problem": key,
                "strict": a.get("status"),
                "kernelbench": b.get("status"),
                "strict_speedup": _speedup(a),
                "kernelbench_speedup": _speedup(b),
                "same": (a.get("status") == VERIFIED) == (b.get("status") == VERIFIED),
                "why": str(b.get("status_reason") or "")[:120] if a.get("status") != b.get("status") else "",
            }
        )
    return sorted(out, key=lambda row: (row["same"], row["problem"]))


def table(found: list[dict[str, Any]]) -> str:
    lines = [
        "| problem | strict | x eager | kernelbench | x eager | same verdict | kernelbench's reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in found:
        lines.append(
            f"| {r['problem']} | {r['strict']} | {r['strict_speedup']} | {r['kernelbench']} | "
            f"{r['kernelbench_speedup']} | {'yes' if r['same'] else 'NO'} | {r['why']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.benchmarks.harnesses", description=__doc__.split("\n")[0]
    )
    parser.add_argument("strict", type=Path, help="results.jsonl of the strict run")
    parser.add_argument("kernelbench", type=Path, help="results.jsonl of the kernelbench-mode run")
    args = parser.parse_args(argv)
    found = rows(read_records(args.strict), read_records(args.kernelbench))
    differ = [r for r in found if not r["same"]]
    verified = {h: sum(r[h] == VERIFIED for r in found) for h in ("strict", "kernelbench")}
    print(table(found))
    print(
        f"\n{len(found)} problems in both runs: verified {verified['strict']} (strict), "
        f"{verified['kernelbench']} (kernelbench); verdicts differ on {len(differ)}"
    )
    return 0 if found and not differ else 1


if __name__ == "__main__":
    sys.exit(main())
