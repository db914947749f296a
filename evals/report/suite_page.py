"""The eval's page: OUT/report.html (self-contained) plus the PNGs it shows, and each run's HTML twin.

    stitchcuda report EVAL_OUT [--out DIR] [--suite DIR ...]

Why a page: an eval ends with per-level metrics and a table per problem; the page puts the plots a
GPU engineer reads first (speedup bars, fast_p, roofline, coverage) above a table that sorts on a
click and links each run's own report.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evals.metrics import FAST_P, is_correct, p_label, summarize
from evals.report import html as h
from evals.report import suite_plots
from evals.report.suite_data import (
    DEFAULT_SUITES,
    coverage,
    eager_ms,
    level_totals,
    load_records,
    roofline_points,
    run_link,
)
from evals.runner import _sort_key

PLOTS = ("speedups", "fast_p", "roofline", "coverage")


def default_ceilings(gpu: str) -> Any:
    from tools.roofline import device_ceilings

    return device_ceilings(gpu)


def report_folder(eval_out: Path, out: Path | None) -> Path:
    """Where the page goes: --out, else the eval folder, else '<records file stem>-report' next to the file."""
    if out is not None:
        return out
    return eval_out if eval_out.is_dir() else eval_out.with_name(f"{eval_out.stem}-report")


def write_suite_report(
    eval_out: Path,
    out: Path | None = None,
    suites: Sequence[Path] = DEFAULT_SUITES,
    ceilings_of: Callable[[str], Any] = default_ceilings,
    run_pages: bool = True,
) -> Path:
    """Write report.html and report-<plot>.png; returns the page's path. ValueError without records."""
    records = sorted(load_records(eval_out), key=lambda r: _sort_key(r["problem"]))
    folder = report_folder(eval_out, out)
    folder.mkdir(parents=True, exist_ok=True)
    runs_root = eval_out if eval_out.is_dir() else None
    if run_pages and runs_root is not None:
        _write_run_pages(runs_root, records)
    totals = level_totals(records, runs_root)
    levels = sorted(totals)
    points = roofline_points(records, runs_root, suites)
    pngs = {
        "speedups": suite_plots.speedup_bars(records, levels),
        "fast_p": suite_plots.fast_p_curves(records, totals),
        "roofline": suite_plots.roofline(points, ceilings_of),
        "coverage": suite_plots.coverage_bars(records),
    }
    for name, data in pngs.items():
        (folder / f"report-{name}.png").write_bytes(data)
    links = {r["problem"]: _relative_link(runs_root, r["problem"], folder) for r in records}
    page = h.page("StitchCUDA eval report", _body(records, totals, pngs, links, eval_out))
    target = folder / "report.html"
    target.write_text(page)
    return target


def _relative_link(runs_root: Path | None, problem: str, folder: Path) -> str | None:
    """The run's report as a link from the page's folder (the page may be written elsewhere with --out)."""
    link = run_link(runs_root, problem)
    if link is None or runs_root is None:
        return None
    return Path(os.path.relpath((runs_root / link).resolve(), folder.resolve())).as_posix()


def _write_run_pages(eval_out: Path, records: Sequence[dict[str, Any]]) -> None:
    from evals.report.run_page import write_run_page

    for record in records:
        run_dir = eval_out / "runs" / record["problem"]
        if (run_dir / "report.json").exists():
            write_run_page(run_dir)


def _summary_rows(records: Sequence[dict[str, Any]], totals: dict[str, int]) -> list[list[h.Cell]]:
    summary = summarize(records, totals)
    rows = []
    for level, m in [*summary["levels"].items(), ("all", summary["all"])]:
        for baseline in ("eager", "compile"):
            c = m[f"vs_{baseline}"]
            rows.append(
                [
                    h.Cell(level),
                    h.number(m["problems"], "d"),
                    h.number(m["compile_rate"], ".0%"),
                    h.number(m["correctness_rate"], ".0%"),
                    h.number(m["hacking_rate"], ".0%"),
                    h.Cell(baseline),
                    h.number(c["geomean_speedup"], ".2f", "x"),
                    *[h.number(c["fast_p"][p_label(p)], ".0%") for p in FAST_P],
                ]
            )
    return rows


def _problem_rows(records: Sequence[dict[str, Any]], links: dict[str, str | None]) -> list[list[h.Cell]]:
    rows = []
    for r in records:
        share, what = coverage(r)
        speed, versus = r.get("speedup_vs_eager"), r.get("speedup_vs_compile")
        correct = is_correct(r)
        mode = r.get("best_compile_mode")
        link = links.get(r["problem"])
        rows.append(
            [
                h.Cell(r["problem"], href=link),
                h.Cell(r.get("level") or "custom"),
                h.Cell(str(r.get("status")), css="good" if correct else "bad"),
                h.Cell(str(r.get("verdict") or "-")),
                h.number(r.get("candidate_ms"), ".3f"),
                h.number(eager_ms(r), ".3f"),
                h.number(r.get("best_compile_ms"), ".3f", f" ({mode})" if mode else ""),
                h.number(speed if correct else None, ".2f", "x", "good" if (speed or 0) > 1 else ""),
                h.number(versus if correct else None, ".2f", "x", "good" if (versus or 0) > 1 else ""),
                h.number(share, ".0%", f" ({what})" if share is not None else ""),
                h.number(r.get("iterations"), "d")
                if isinstance(r.get("iterations"), int)
                else h.number(None, ""),
                h.number(r.get("seconds"), ".0f"),
                h.Cell("report" if link else "not recorded", href=link),
            ]
        )
    return rows


def _body(
    records: Sequence[dict[str, Any]],
    totals: dict[str, int],
    pngs: dict[str, bytes],
    links: dict[str, str | None],
    eval_out: Path,
) -> str:
    devices = sorted({str(r.get("device")) for r in records if r.get("device")})
    correct = sum(1 for r in records if is_correct(r))
    parts = [
        f'<p class="note">{len(records)} problems from <code>{h.escape(str(eval_out))}</code>; '
        f"{correct} correct; devices: {h.escape(', '.join(devices) or '-')}. Click a column to sort.</p>",
        "<h2>Summary (KernelBench metrics; every rate is over all problems of a level)</h2>",
        h.table(
            [
                "level",
                "problems",
                "compiled",
                "correct",
                "hacked",
                "vs",
                "geomean",
                *[f"fast_{p_label(p)}" for p in FAST_P],
            ],
            _summary_rows(records, totals),
            sortable=False,
        ),
        "<h2>Speedup per problem</h2>",
        h.image(pngs["speedups"], "speedup per problem", "sorted bars coloured by level; 1x is the baseline"),
        "<h2>fast_p</h2>",
        h.image(pngs["fast_p"], "fast_p curves", "share of all problems that are correct and faster than p"),
        "<h2>Roofline</h2>",
        h.image(
            pngs["roofline"],
            "roofline",
            "each problem's FLOPs per compulsory byte against its achieved FLOP/s, under the GPU's measured "
            "ceilings; ours filled, eager open, joined per problem",
        ),
        "<h2>Operator coverage</h2>",
        h.image(pngs["coverage"], "operator coverage", "share of each problem done by our own kernels"),
        "<h2>Problems</h2>",
        h.table(
            [
                "problem",
                "level",
                "status",
                "verdict",
                "ours ms",
                "eager ms",
                "best compile ms",
                "vs eager",
                "vs compile",
                "coverage",
                "iterations",
                "run s",
                "run report",
            ],
            _problem_rows(records, links),
            ident="problems",
        ),
    ]
    return "\n".join(parts)
