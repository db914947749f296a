"""Do the offline policy's programs compute what their references compute? An emulated sweep, CPU only.

    python -m evals.emulation_sweep KERNELBENCH/KernelBench [--levels level1,level2,level3]
                                    [--out sweep.jsonl] [--timeout 180] [--only REGEX]

Each problem's module-level size constants are shrunk (`shrink_sizes`: batch sizes to 2, any other
integer above 32 divided by 16, to at least 16) so that the CPU emulation (tools/emulation, docs/
emulation.md) runs it in seconds; the shrunk problem is planned and written as the offline policy
writes it, built for the emulation and run beside its reference on the same seeded inputs
(`tools.worker.compare.compare_outputs`: KernelBench's allclose, 1e-4, NaN never matching). A
shrunk problem whose reference no longer runs (sizes that had to agree) is `skipped`; a reference
that answers differently on two seeded runs is `stochastic`. The
kernels' paths at full size can differ from the shrunk ones (a row long enough to be split); the
fixture and family tests cover those. Records go to --out one JSON line per problem as they finish
(a second run skips what is recorded); a per-level table is printed last.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from evals.coverage_sweep import PlanTimeout, problem_files, time_limit

STATUSES = ("ok", "wrong", "error", "unsupported", "skipped", "stochastic")


def _constant_int(node: ast.expr) -> int | None:
    """The value of an integer expression made only of literals (`2048 * 2`), else None."""
    allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)
    if not all(isinstance(n, allowed) for n in ast.walk(node)):
        return None
    try:
        value = eval(compile(ast.Expression(node), "<size>", "eval"), {"__builtins__": {}})
    except Exception:
        return None
    return value if type(value) is int else None


def shrink_sizes(source: str) -> str:
    """The problem with its module-level integer sizes made small (one-line `name = <int expr>` only)."""
    lines = source.splitlines()
    for node in ast.parse(source).body:
        if not (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            continue
        value = _constant_int(node.value)
        if value is None or node.lineno != node.end_lineno:
            continue
        name = node.targets[0].id
        small = min(value, 2) if "batch" in name.lower() else (max(16, value // 16) if value > 32 else value)
        line = lines[node.lineno - 1]  # other statements on the line (`a = 1; b = 2`) stay as they are
        lines[node.lineno - 1] = f"{line[: node.col_offset]}{name} = {small}{line[node.end_col_offset :]}"
    return "\n".join(lines) + "\n"


def check_one(path: Path, work: Path, timeout_s: int) -> dict[str, Any]:
    """Shrink, plan, write, build for the emulation and compare one problem (a record)."""
    import runpy

    import torch

    from codegen.emit.assemble import Options, assemble
    from codegen.schedule.plan import analyse
    from graph.artifacts import Task
    from tools.emulation.program import Unsupported, load_program
    from tools.worker.compare import DEFAULT_TOLERANCE, compare_outputs

    started = time.time()
    small = work / path.name
    small.write_text(shrink_sizes(path.read_text()))
    record: dict[str, Any] = {}

    def run(model_class: Any, init: list[Any], inputs: list[Any]) -> Any:
        torch.manual_seed(42)
        model = model_class(*init)
        torch.manual_seed(7)
        with torch.no_grad():
            return model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])

    try:
        with time_limit(timeout_s):
            reference = runpy.run_path(str(small))
            init = reference["get_init_inputs"]()
            torch.manual_seed(1)
            inputs = reference["get_inputs"]()
            expected = run(reference["Model"], init, inputs)
    except Exception as exc:
        return {"status": "skipped", "message": f"shrunk reference: {type(exc).__name__}: {str(exc)[:160]}"}
    try:
        with time_limit(timeout_s):
            if not compare_outputs(expected, run(reference["Model"], init, inputs), 0.0, 0.0).ok:
                return {"status": "stochastic", "message": "two seeded reference runs differ"}
            analysis = analyse(Task(name=small.stem, path=str(small), source=small.read_text()))
            program = assemble(analysis, Options(arch="sm_90"))
            record["covered"] = len(program.covered_ops)
            record["uncovered"] = sorted(set(program.uncovered_ops))
            got = run(load_program(program.source)["ModelNew"], init, inputs)
        # KernelBench's allclose (NaN never matches), as the harness compares
        verdict = compare_outputs(expected, got, DEFAULT_TOLERANCE, DEFAULT_TOLERANCE)
        record.update(status="ok" if verdict.ok else "wrong", max_abs_err=verdict.max_abs_err)
        if not verdict.ok:
            record["message"] = verdict.problem or f"worst at {verdict.where}"
    except Unsupported as exc:
        record.update(status="unsupported", message=str(exc))
    except PlanTimeout as exc:
        record.update(status="error", message=str(exc))
    except Exception as exc:  # a program that fails to build or run is a finding of the sweep
        record.update(status="error", message=f"{type(exc).__name__}: {str(exc)[:300]}")
    record["seconds"] = round(time.time() - started, 2)
    return record


def summary(records: list[dict[str, Any]]) -> str:
    """Per level: problems, and how many ended in each status; then every problem that is not ok."""
    levels = sorted({r["problem"].split("/")[0] for r in records})
    lines = ["| level | problems | " + " | ".join(STATUSES) + " |", "|" + "---|" * (len(STATUSES) + 2)]
    for level in levels + ["all"]:
        mine = [r for r in records if level == "all" or r["problem"].startswith(level + "/")]
        counts = Counter(r["status"] for r in mine)
        lines.append(
            f"| {level} | {len(mine)} | " + " | ".join(str(counts.get(s, 0)) for s in STATUSES) + " |"
        )
    odd = [r for r in records if r["status"] not in ("ok", "skipped")]
    lines += [f"- {r['problem']}: {r['status']} {r.get('message', '')}".rstrip() for r in odd]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "root", type=Path, help="a folder with level1/ level2/ level3/ (KernelBench's KernelBench/)"
    )
    parser.add_argument("--levels", default="level1,level2,level3")
    parser.add_argument("--out", type=Path, default=Path("emulation-sweep.jsonl"))
    parser.add_argument("--timeout", type=int, default=180, help="seconds per problem (Python-level steps)")
    parser.add_argument("--only", default="", help="regular expression on level/problem")
    args = parser.parse_args(argv)
    problems = [
        (n, p) for n, p in problem_files(args.root, args.levels.split(",")) if re.search(args.only, n)
    ]
    if not problems:
        print(f"no problems under {args.root} for {args.levels}", file=sys.stderr)
        return 2
    done = {}
    if args.out.exists():
        done = {
            r["problem"]: r for r in map(json.loads, args.out.read_text().splitlines()) if r.get("problem")
        }
    work = Path(tempfile.mkdtemp(prefix="stitch-emulation-sweep-"))
    with args.out.open("a") as sink:
        for i, (name, path) in enumerate(problems, 1):
            if name in done:
                continue
            record = {"problem": name, **check_one(path, work, args.timeout)}
            done[name] = record
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            print(
                f"[{i}/{len(problems)}] {name}: {record['status']} {record.get('message', '')}"[:200],
                flush=True,
            )
    print(summary([done[n] for n, _ in problems if n in done]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
