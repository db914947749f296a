"""`stitchcuda eval` (a suite of runs, then its report) and `stitchcuda report` (redraw the page).

Why a module of its own: these commands drive many `stitchcuda run` processes through
evals/runner.py and the report pages in evals/report; the single-run command (graph/cli.py) needs
none of that.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from graph.cli_common import EXIT_BAD_INPUT, add_sandbox_flag, use_sandbox


def add_eval_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="run StitchCUDA over suites (our evals/suite or a KernelBench checkout's level folders)",
        description="Run every problem of the suites, then time its PyTorch baselines (eager and "
        "torch.compile) on the same GPU; records go to OUT/results.jsonl as they finish, so a second call "
        "with the same --out resumes. Writes OUT/summary.json (metrics per level) and OUT/table.md. "
        "Arguments after -- go to every `stitchcuda run` (main() splits them off).",
    )
    p.add_argument("suites", nargs="+", help="suite folders (level1/, level2/, ...) or problem files")
    p.add_argument("--out", default="stitchcuda-eval", help="output folder (default: stitchcuda-eval)")
    p.add_argument("--policy", default=None, help="offline (default) or llm")
    p.add_argument(
        "--jobs", type=int, default=1, help="problems run at once (builds overlap; GPU work is serialised)"
    )
    p.add_argument("--only", default=None, help="regular expression on level/name, e.g. 'level1/(1|4)_'")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per problem run")
    p.add_argument(
        "--baselines",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="time eager and torch.compile baselines per problem (default: on when a GPU is present)",
    )
    p.add_argument(
        "--baseline-modes",
        default="eager,default,max-autotune-no-cudagraphs,reduce-overhead",
        help="comma list of eager and torch.compile modes to time",
    )
    p.add_argument("--baseline-timeout", type=float, default=1800.0, help="seconds per problem's baselines")
    _add_executor_flags(p)
    add_sandbox_flag(p, None)
    # A JSON list that replaces `python -m graph.cli` for each problem's run (the tests' scripted policy).
    p.add_argument("--run-command", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_eval, run_args=[])


def _add_executor_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local: --jobs threads on this machine; ray: each problem a Ray task needing one GPU",
    )
    p.add_argument(
        "--ray-address", default=None, help="the Ray cluster to join (e.g. auto); default: start a local one"
    )
    p.add_argument(
        "--ray-gpus", type=int, default=None, help="GPUs a local Ray instance declares (default: detected)"
    )
    p.add_argument(
        "--ray-gpus-per-task", type=float, default=1.0, help="GPUs each problem's task needs (default 1)"
    )


def _ray_options(args: argparse.Namespace) -> Any:
    """RayOptions for --executor ray, else None (the local executor)."""
    if args.executor != "ray":
        return None
    from evals.ray_executor import RayOptions

    if args.ray_gpus_per_task <= 0:
        raise ValueError("--ray-gpus-per-task must be positive")
    return RayOptions(address=args.ray_address, num_gpus=args.ray_gpus, gpus_per_task=args.ray_gpus_per_task)


def cmd_eval(args: argparse.Namespace) -> int:
    import re

    from rich.console import Console

    from evals.gpu_health import drop_line
    from evals.metrics import summary_table
    from evals.progress import EvalProgress
    from evals.runner import (
        DEFAULT_CLI,
        baseline_config,
        discover,
        read_results,
        results_table,
        run_suite,
        write_summary,
    )
    from tools.problem import ProblemError

    run_args = [a for a in args.run_args if a != "--"]
    # Parsed without main()'s split at `--`, argparse files the run's arguments as suites.
    cut = next((i for i, name in enumerate(args.suites) if name.startswith("-")), None)
    if cut is not None:
        run_args = [*args.suites[cut:], *run_args]
        args.suites = args.suites[:cut]
    try:
        problems = discover(args.suites)
    except ProblemError as exc:
        print(f"stitchcuda: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.only:
        problems = [p for p in problems if re.search(args.only, p.key)]
    if not problems:
        print("stitchcuda: no problems found", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = Path(args.out)
    if args.policy:
        run_args += ["--policy", args.policy]
    if not use_sandbox(args.sandbox):
        return EXIT_BAD_INPUT
    if args.sandbox:
        run_args += ["--sandbox", args.sandbox]
    try:
        baseline = baseline_config(args.baselines, args.baseline_modes, args.baseline_timeout, run_args)
        cli = tuple(json.loads(args.run_command)) if args.run_command else DEFAULT_CLI
        ray = _ray_options(args)
    except ValueError as exc:
        print(f"stitchcuda: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    done = {r["problem"] for r in read_results(out / "results.jsonl")}
    already = len([p for p in problems if p.key in done])
    console = Console(stderr=True, highlight=False)
    if already:
        console.print(
            f"resuming: {already} of {len(problems)} problems already recorded in {out / 'results.jsonl'}"
        )
    console.print(
        f"baselines: {', '.join(baseline.modes)} on {baseline.device}"
        if baseline.enabled
        else "baselines: off"
    )
    keys = {p.key for p in problems}
    verified = sum(
        1
        for r in read_results(out / "results.jsonl")
        if r["problem"] in keys and r.get("status") == "verified"
    )
    with EvalProgress(len(problems), already, verified, console) as progress:
        records = run_suite(
            problems,
            out,
            run_args,
            jobs=args.jobs,
            timeout_s=args.timeout,
            on_done=progress.finished,
            baseline=baseline,
            cli=cli,
            on_start=lambda problem: progress.started(problem.key),
            ray=ray,
        )
    summary = write_summary(out, records, problems)
    print(results_table(records))
    print(summary_table(summary))
    overall = summary["all"]
    geo = overall["vs_eager"]["geomean_speedup"]
    line = f"\ncorrect {overall['correctness_rate']:.0%} of {overall['problems']}"
    line += f"; geomean speedup vs eager {geo:.2f}x" if geo else ""
    geo_c = overall["vs_compile"]["geomean_speedup"]
    line += f", vs best torch.compile {geo_c:.2f}x" if geo_c else ""
    print(line + f"; results in {out}")
    for drop in summary.get("dropped_gpus", []):
        print(f"dropped: {drop_line(drop)}")
    _write_eval_report(out)
    return 0


def _write_eval_report(out: Path) -> None:
    """The eval's page at its end; a missing `report` extra or a plotting error costs the page, not the eval."""
    try:
        from evals.report.suite_page import write_suite_report
    except ImportError as exc:
        print(f"report: not written ({exc}; install the `report` extra)", file=sys.stderr)
        return
    try:
        print(f"report: {write_suite_report(out)}")
    except Exception as exc:  # noqa: BLE001 - the records are safe on disk; say why the page is missing
        print(f"report: not written ({type(exc).__name__}: {exc})", file=sys.stderr)


def add_report_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="draw an eval's report.html (plots, roofline, sortable table) and each run's HTML twin",
        description="Reads EVAL_OUT/results.jsonl (or a results .jsonl file) and writes report.html, a "
        "self-contained page, plus the PNGs it shows (docs/reports.md).",
    )
    p.add_argument("eval_out", help="an eval's --out folder, or a results .jsonl file")
    p.add_argument("--out", default=None, help="folder for the page (default: EVAL_OUT)")
    p.add_argument(
        "--suite",
        action="append",
        default=None,
        help="suite folder to find problem files in for work figures (default: evals/suite); repeatable",
    )
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    try:
        from evals.report.suite_page import DEFAULT_SUITES, write_suite_report
    except ImportError as exc:
        print(f"stitchcuda: {exc}; install the `report` extra (pip install -e '.[report]')", file=sys.stderr)
        return EXIT_BAD_INPUT
    suites = [Path(s) for s in args.suite] if args.suite else list(DEFAULT_SUITES)
    try:
        page = write_suite_report(Path(args.eval_out), Path(args.out) if args.out else None, suites)
    except ValueError as exc:
        print(f"stitchcuda: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(page)
    return 0
