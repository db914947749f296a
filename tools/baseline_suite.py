"""`python -m tools.baselines --suite ...`: every problem of a suite measured, as a table for the lead.

Why apart from tools.baselines: that module is the child process's protocol and the parent's launcher;
this is a reporting loop over them, run by hand (docs/benchmarks.md). It is handed the launcher
(`measure`) rather than importing it, so the two modules do not import each other.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def suite_table(rows: list[dict[str, Any]], modes: Sequence[str]) -> str:
    """One row per problem: each mode's mean ms, the best compile mode and eager over it."""
    head = "| problem | status | " + " | ".join(f"{m} ms" for m in modes) + " | best compile | eager/best |"
    lines = [head, "|" + "---|" * (len(modes) + 4)]
    for row in rows:
        baselines = row.get("baselines") or {}
        cells = []
        for mode in modes:
            entry = baselines.get(mode) or {}
            cells.append(f"{entry['mean_ms']:.4g}" if entry.get("mean_ms") else ("error" if entry else "-"))
        best = row.get("best_compile")
        eager = (baselines.get("eager") or {}).get("mean_ms")
        ratio = f"{eager / best['mean_ms']:.2f}x" if best and eager else "-"
        lines.append(
            f"| {row['problem']} | {row.get('status')} | "
            + " | ".join(cells)
            + f" | {best['mode'] if best else '-'} | {ratio} |"
        )
    return "\n".join(lines)


def suite_main(args: argparse.Namespace, measure: Callable[..., dict[str, Any]]) -> int:
    """Measure every selected problem with `measure` (tools.baselines.measure_baselines); 0 when all passed."""
    from tools.problem import select_problem_files

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    files = select_problem_files(args.suite, args.only)
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    rows = []
    for file in files:
        key = f"{file.parent.name}/{file.stem}"
        print(f"[baselines] {key} ...", file=sys.stderr, flush=True)
        answer = measure(
            file.read_text(),
            file.stem,
            modes=modes,
            device=args.device,
            perf_trials=args.perf_trials,
            harness=args.harness,
            on_device=args.inputs_on_device,
            cache_dir=args.cache_dir,
            refresh=args.refresh,
            timeout_s=args.timeout,
        )
        answer["problem"] = key
        rows.append(answer)
        if out:
            with (out / "baselines.jsonl").open("a") as fh:
                fh.write(json.dumps(answer) + "\n")
    text = suite_table(rows, modes)
    if out:
        (out / "baselines.md").write_text(text + "\n")
    print(text)
    return 0 if all(r.get("status") == "passed" for r in rows) else 1
