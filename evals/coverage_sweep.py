"""How much of a suite would the offline policy write as our own CUDA? A planning sweep, CPU only.

    python -m evals.coverage_sweep KERNELBENCH/KernelBench [--levels level1,level2,level3]
                                   [--out sweep.jsonl] [--timeout 120] [--ops-table ops.md]

Plans every problem (tracing, classification, fusion: no build, no GPU) and records the ops the
plan leaves to PyTorch. Prints, per level, how many problems leave nothing to PyTorch, how many keep
a whole `forward`, and which uncovered ops occur in how many problems; --ops-table writes the index
of every op met, with the kernel families that generate it (docs/operators.md). Records go to --out one JSON
line per problem as they finish; a second run with the same --out skips what is recorded.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

WHOLE_FORWARD = "forward"  # the planner's name for a module it could not trace into


class PlanTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expire(*_: Any) -> None:
        raise PlanTimeout(f"planning took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def problem_files(root: Path, levels: list[str]) -> list[tuple[str, Path]]:
    from tools.problem import suite_files

    found = []
    for level in levels:
        folder = root / level
        if folder.is_dir():
            found += [(f"{level}/{path.stem}", path) for path in suite_files(folder)]
    return found


def plan_one(path: Path, timeout_s: int) -> dict[str, Any]:
    from codegen.policy import OfflinePolicy
    from graph.context import Context
    from nodes.planner import load_task

    started = time.time()
    record: dict[str, Any] = {}
    try:
        with time_limit(timeout_s):
            task = load_task({"problem_path": str(path)})
            plan = OfflinePolicy(Context(policy="offline")).plan(task, None)
        record.update(traced=plan.traced, uncovered=sorted(set(plan.uncovered_ops)), covered=plan.covered_ops)
        record["families"] = op_families(plan)
    except PlanTimeout as exc:
        record["error"] = str(exc)
    except Exception as exc:  # a problem the planner cannot load is a finding of the sweep, not a crash
        record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    record["seconds"] = round(time.time() - started, 2)
    return record


def op_families(plan: Any) -> dict[str, list[str]]:
    """Each op kind of the plan and the fusion-group kinds it went into (gemm, reduction, reference,
    ...): an op fused as a prologue or epilogue shows its anchor's kind."""
    op_of = {info.node: info.op for info in plan.ops}
    found: dict[str, set[str]] = {}
    for group in plan.groups:
        for node in group.nodes:
            if node in op_of:
                found.setdefault(op_of[node], set()).add(group.kind)
    return {op: sorted(kinds) for op, kinds in sorted(found.items())}


def ops_table(records: list[dict[str, Any]]) -> str:
    """Markdown: every op kind the sweep met, the group kinds that generate it, in how many problems,
    and whether any plan left it to PyTorch."""
    problems: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    for record in records:
        for op, families in record.get("families", {}).items():
            problems[op] += 1
            kinds.setdefault(op, Counter()).update(families)
    lines = [
        "| op | generated as (group kind: problems) | problems | left to PyTorch in |",
        "|---|---|---|---|",
    ]
    for op in sorted(problems, key=lambda o: (-problems[o], o)):
        made = ", ".join(f"{kind}: {n}" for kind, n in kinds[op].most_common() if kind != "reference")
        left = kinds[op].get("reference", 0)
        lines.append(f"| {op} | {made or '-'} | {problems[op]} | {left or '-'} |")
    return "\n".join(lines) + "\n"


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    levels: dict[str, dict[str, int]] = {}
    ops: Counter[str] = Counter()
    for record in records:
        level = record["problem"].split("/", 1)[0]
        row = levels.setdefault(level, {"problems": 0, "fully_covered": 0, "whole_forward": 0, "errors": 0})
        row["problems"] += 1
        if "error" in record:
            row["errors"] += 1
            continue
        uncovered = record.get("uncovered", [])
        row["fully_covered"] += not uncovered
        row["whole_forward"] += WHOLE_FORWARD in uncovered
        ops.update(set(uncovered))
    total = sum(r["problems"] for r in levels.values())
    covered = sum(r["fully_covered"] for r in levels.values())
    return {
        "levels": levels,
        "uncovered_ops": dict(ops.most_common()),
        "total": total,
        "fully_covered": covered,
    }


def render(summary: dict[str, Any]) -> str:
    lines = ["| level | problems | fully covered | keep a whole forward | errors |", "|---|---|---|---|---|"]
    for level, row in sorted(summary["levels"].items()):
        lines.append(
            f"| {level} | {row['problems']} | {row['fully_covered']} | {row['whole_forward']} | {row['errors']} |"
        )
    share = summary["fully_covered"] / summary["total"] if summary["total"] else 0.0
    lines.append(f"\nfully covered: {summary['fully_covered']} of {summary['total']} ({share:.0%})")
    ops = ", ".join(f"{op} {count}" for op, count in summary["uncovered_ops"].items())
    lines.append(f"uncovered ops (problems containing each): {ops or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, help="a folder holding level1/, level2/, ... (KernelBench layout)")
    parser.add_argument("--levels", default="level1,level2,level3")
    parser.add_argument("--out", type=Path, help="JSON lines, one per problem (resumable)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds of planning per problem")
    parser.add_argument("--ops-table", type=Path, help="write the op index (markdown) here")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"error: {args.root} is not a folder", file=sys.stderr)
        return 2
    files = problem_files(args.root, [lv.strip() for lv in args.levels.split(",") if lv.strip()])
    if not files:
        print(f"error: no problems under {args.root} for levels {args.levels}", file=sys.stderr)
        return 2
    records: list[dict[str, Any]] = []
    done: dict[str, dict[str, Any]] = {}
    if args.out and args.out.exists():
        for line in args.out.read_text().splitlines():
            record = json.loads(line)
            done[record["problem"]] = record
    sink = args.out.open("a") if args.out else None
    try:
        for index, (key, path) in enumerate(files, 1):
            record = done.get(key) or {"problem": key, **plan_one(path, args.timeout)}
            records.append(record)
            if key not in done and sink:
                sink.write(json.dumps(record) + "\n")
                sink.flush()
            state = "error" if "error" in record else ("covered" if not record["uncovered"] else "partial")
            print(
                f"[{index}/{len(files)}] {key}: {state} ({record['seconds']} s)", file=sys.stderr, flush=True
            )
    finally:
        if sink:
            sink.close()
    print(render(summarize(records)))
    if args.ops_table:
        args.ops_table.write_text(ops_table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
