"""The eval's records as the report reads them: totals per level, work figures, roofline points, coverage.

Why apart from the plots: the figures behind each plot are checked by tests without drawing, and the
same numbers fill the page's table. Work figures (FLOPs, compulsory bytes) come from the record
(the runner copies them from the run's plan), else the run's report.json, else the planner's fx
analysis of the problem file found in the suite folders (CPU only, meta tensors: seconds for a suite).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.runner import REPO, read_results

DEFAULT_SUITES = (REPO / "evals" / "suite",)


@dataclass(frozen=True)
class RooflinePoint:
    problem: str
    level: str
    gpu: str
    flops: int
    bytes: int
    ours_ms: float | None
    eager_ms: float | None

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    def throughput(self, ms: float | None) -> float | None:
        """FLOP/s of a forward that took `ms` milliseconds."""
        return self.flops / (ms / 1e3) if ms and ms > 0 else None


def load_records(eval_out: Path) -> list[dict[str, Any]]:
    """OUT/results.jsonl (or a .jsonl file itself); ValueError when there is nothing to report."""
    path = eval_out if eval_out.is_file() else eval_out / "results.jsonl"
    if not path.exists():
        raise ValueError(f"{path}: no such file (run `stitchcuda eval --out {eval_out}` first)")
    records = read_results(path)
    if not records:
        raise ValueError(f"{path}: no complete records")
    return records


def level_totals(records: Sequence[dict[str, Any]], eval_out: Path | None = None) -> dict[str, int]:
    """Problems per level: the eval's summary.json when it has them (missing problems count), else the records."""
    totals: dict[str, int] = {}
    for record in records:
        totals[record.get("level") or "custom"] = totals.get(record.get("level") or "custom", 0) + 1
    summary = eval_out / "summary.json" if eval_out is not None and eval_out.is_dir() else None
    if summary is not None and summary.exists():
        try:
            levels = json.loads(summary.read_text()).get("levels") or {}
            for level, metrics in levels.items():
                totals[level] = max(totals.get(level, 0), int(metrics.get("problems") or 0))
        except (OSError, ValueError, AttributeError, TypeError):
            pass
    return dict(sorted(totals.items()))


def eager_ms(record: dict[str, Any]) -> float | None:
    return record.get("baseline_eager_ms") or record.get("verifier_eager_ms")


def run_report(eval_out: Path | None, problem: str) -> dict[str, Any] | None:
    if eval_out is None or not eval_out.is_dir():
        return None
    path = eval_out / "runs" / problem / "report.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _problem_file(problem: str, suites: Sequence[Path]) -> Path | None:
    level, _, name = problem.partition("/")
    for suite in suites:
        for candidate in (suite / level / f"{name}.py", suite / f"{name}.py"):
            if candidate.is_file():
                return candidate
    return None


def _analysed_work(path: Path, level: str) -> tuple[int, int] | None:
    from codegen.schedule.plan import analyse, build_plan
    from graph.artifacts import Task

    task = Task(name=path.stem, path=str(path), source=path.read_text(), level=level)
    analysis = analyse(task)
    if not analysis.ok:
        return None
    plan = build_plan(task, analysis)
    return int(plan.total_flops), int(plan.total_bytes)


def work_figures(
    record: dict[str, Any], eval_out: Path | None, suites: Sequence[Path] = DEFAULT_SUITES
) -> tuple[int, int] | None:
    """(FLOPs, bytes) of one forward, or None when no source gives both as positive numbers."""
    found: tuple[int, int] | None = None
    if record.get("work_flops") and record.get("work_bytes"):
        found = int(record["work_flops"]), int(record["work_bytes"])
    else:
        plan = (run_report(eval_out, record["problem"]) or {}).get("plan") or {}
        if plan.get("total_flops") and plan.get("total_bytes"):
            found = int(plan["total_flops"]), int(plan["total_bytes"])
        else:
            path = _problem_file(record["problem"], suites)
            found = _analysed_work(path, record.get("level") or "custom") if path else None
    return found if found and found[0] > 0 and found[1] > 0 else None


def roofline_points(
    records: Sequence[dict[str, Any]], eval_out: Path | None, suites: Sequence[Path] = DEFAULT_SUITES
) -> list[RooflinePoint]:
    """One point pair per problem that has work figures, a GPU name and a time (ours or eager)."""
    points = []
    for record in records:
        gpu = record.get("device") or ""
        if not gpu or gpu == "cpu" or not (record.get("candidate_ms") or eager_ms(record)):
            continue
        work = work_figures(record, eval_out, suites)
        if work is None:
            continue
        ours = record.get("candidate_ms") if record.get("status") == "verified" else None
        points.append(
            RooflinePoint(
                record["problem"], record.get("level") or "custom", gpu, *work, ours, eager_ms(record)
            )
        )
    return points


def coverage(record: dict[str, Any]) -> tuple[float | None, str]:
    """(share, what it measures): the hack checker's GPU-time coverage, else the share of op kinds covered."""
    measured = record.get("operator_coverage")
    if isinstance(measured, int | float):
        return float(measured), "GPU time"
    covered = len(record.get("covered_ops") or [])
    uncovered = len(record.get("uncovered_ops") or [])
    if covered + uncovered == 0:
        return None, "-"
    return covered / (covered + uncovered), "op kinds"


def run_link(eval_out: Path | None, problem: str) -> str | None:
    """The run's report, relative to the eval folder: report.html, else report.md, else None."""
    if eval_out is None or not eval_out.is_dir():
        return None
    for name in ("report.html", "report.md"):
        if (eval_out / "runs" / problem / name).exists():
            return f"runs/{problem}/{name}"
    return None
