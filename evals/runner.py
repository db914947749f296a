"""Run StitchCUDA over a suite: one `stitchcuda run` per problem, records kept as they finish.

Each problem runs in its own process (`python -m graph.cli run ...`), several at a time, so
independent candidates build in parallel; the evaluation worker serialises GPU work with a file
lock, so timings are not disturbed by the neighbours. Every finished problem is appended to
`OUT/results.jsonl` at once: a crash loses nothing, and a second invocation with the same OUT skips
what is already there (resume).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.metrics import summarize

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SuiteProblem:
    key: str  # "level1/1_ReLU"
    level: str
    path: Path


def discover(paths: Sequence[str]) -> list[SuiteProblem]:
    """Problem files from suite folders (KernelBench layout) or single files, without loading them."""
    from tools.problem import ProblemError, suite_files

    found: list[SuiteProblem] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            level = path.parent.name if path.parent.name.startswith("level") else "custom"
            found.append(SuiteProblem(f"{level}/{path.stem}", level, path.resolve()))
            continue
        if not path.is_dir():
            raise ProblemError(f"{raw}: no such file or folder")
        for file in suite_files(path):
            level = file.parent.name if file.parent.name.startswith("level") else "custom"
            found.append(SuiteProblem(f"{level}/{file.stem}", level, file.resolve()))
    seen: set[str] = set()
    return [p for p in found if not (p.key in seen or seen.add(p.key))]


def read_results(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
    return records


def run_one(problem: SuiteProblem, out: Path, run_args: Sequence[str], timeout_s: float) -> dict[str, Any]:
    """Run the CLI on one problem and turn its report into a results record."""
    run_dir = out / "runs" / problem.key
    started = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "graph.cli",
        "run",
        str(problem.path),
        "--out",
        str(run_dir),
        "--quiet",
        *run_args,
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        code, stderr = -1, f"timed out after {timeout_s:.0f} s"
    record: dict[str, Any] = {"problem": problem.key, "level": problem.level, "exit_code": code}
    report_path = run_dir / "report.json"
    if report_path.exists():
        report = json.loads(report_path.read_text())
        attempts = report.get("attempts", [])
        record |= {
            k: report.get(k)
            for k in (
                "status",
                "status_reason",
                "speedup_vs_eager",
                "eager_ms",
                "candidate_ms",
                "iterations",
                "build_s",
                "covered_ops",
                "uncovered_ops",
                "device",
            )
        }
        record["built"] = any(a.get("status") not in ("build_error", None) for a in attempts)
    else:
        tail = stderr.strip().splitlines()[-1:] if stderr else []
        record |= {"status": "failed", "status_reason": tail[0] if tail else "no report", "built": False}
    record["seconds"] = round(time.monotonic() - started, 1)
    return record


def run_suite(
    problems: Sequence[SuiteProblem],
    out: Path,
    run_args: Sequence[str] = (),
    jobs: int = 1,
    timeout_s: float = 3600.0,
    on_done: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every problem not yet in OUT/results.jsonl; returns all records (old and new)."""
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    records = read_results(results_path)
    done = {r["problem"] for r in records}
    todo = [p for p in problems if p.key not in done]
    lock = threading.Lock()

    def work(problem: SuiteProblem) -> None:
        record = run_one(problem, out, run_args, timeout_s)
        with lock:
            with results_path.open("a") as fh:
                fh.write(json.dumps(record) + "\n")
            records.append(record)
            if on_done:
                on_done(record)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(work, todo))
    keys = {p.key for p in problems}
    return [r for r in records if r["problem"] in keys]


def totals_by_level(problems: Sequence[SuiteProblem]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for p in problems:
        totals[p.level] = totals.get(p.level, 0) + 1
    return totals


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def results_table(records: Sequence[dict[str, Any]]) -> str:
    """The Markdown table for docs/benchmarks.md."""
    lines = [
        "| problem | status | eager ms | candidate ms | speedup | iterations | build s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: _sort_key(r["problem"])):
        lines.append(
            f"| {r['problem']} | {r.get('status')} | {_fmt(r.get('eager_ms'), '.3f')} | "
            f"{_fmt(r.get('candidate_ms'), '.3f')} | {_fmt(r.get('speedup_vs_eager'), '.2f')} | "
            f"{r.get('iterations', '-')} | {_fmt(r.get('build_s'), '.1f')} |"
        )
    return "\n".join(lines) + "\n"


def _sort_key(key: str) -> tuple[str, int, str]:
    level, _, name = key.partition("/")
    number = name.split("_", 1)[0]
    return level, int(number) if number.isdigit() else 0, name


def write_summary(
    out: Path, records: Sequence[dict[str, Any]], problems: Sequence[SuiteProblem]
) -> dict[str, Any]:
    summary = summarize(records, totals_by_level(problems))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "table.md").write_text(results_table(records))
    return summary
