"""The `stitchcuda` command line.

    stitchcuda run PROBLEM [--out DIR] [--policy offline|llm] [--thread ID] ...
    stitchcuda graph                      # the graph as a Mermaid drawing
    stitchcuda rag build|ingest|query|eval

Exit codes of `run`: 0 verified, 1 failed, 2 bad input (problem or arguments), 3 unverified (the
program built but there is no CUDA device here to check it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_VERIFIED = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNVERIFIED = 3
EXIT_CODES = {"verified": EXIT_VERIFIED, "failed": EXIT_FAILED, "unverified": EXIT_UNVERIFIED}


def _add_run_parser(sub: argparse._SubParsersAction) -> None:
    from graph.context import Context

    defaults = Context()
    p = sub.add_parser(
        "run",
        help="turn one KernelBench-format problem into a verified CUDA program",
        description="Plan, write, verify and optimise a CUDA program for PROBLEM. Exit codes: "
        "0 verified, 1 failed, 2 bad input, 3 unverified (built, but no GPU to check it).",
    )
    p.add_argument("problem", help="path of a KernelBench-format problem file")
    p.add_argument("--out", help="output folder (default: stitchcuda-out/<problem name>)")
    p.add_argument("--policy", default=defaults.policy, help="offline (default, no API key) or llm")
    p.add_argument("--thread", help="checkpoint thread id: resumes that run if it was interrupted")
    p.add_argument("--max-iterations", type=int, default=defaults.max_iterations, help="coder turns at most")
    p.add_argument("--wall-time", type=float, default=defaults.wall_time_s, help="wall-time budget, seconds")
    p.add_argument("--arch", default=defaults.gpu_arch, help="CUDA architecture to build for (sm_90)")
    p.add_argument("--device", default=defaults.device, choices=["cuda", "cpu"], help=argparse.SUPPRESS)
    p.add_argument("--perf-trials", type=int, default=defaults.perf_trials, help="timed calls per program")
    p.add_argument("--quiet", action="store_true", help="print only the final line")
    _add_tracing_flags(p)
    p.set_defaults(func=cmd_run)


def _add_tracing_flags(p: argparse.ArgumentParser) -> None:
    """LangSmith flags of `run` (tracing itself is switched on by LANGSMITH_TRACING=true)."""
    group = p.add_argument_group("LangSmith tracing (when LANGSMITH_TRACING=true)")
    group.add_argument("--tag", action="append", default=[], help="extra tag on the run's trace (repeatable)")
    group.add_argument("--experiment", help="experiment name, recorded as tag experiment:NAME and metadata")


def _tracing_config(args: argparse.Namespace, info: Any, context: Any, thread: str) -> dict[str, Any]:
    """The run's LangSmith name, tags and metadata; with tracing on, a client that cannot stall exit."""
    from graph.tracing import prepare_tracing, run_config

    prepare_tracing()  # no-op unless LANGSMITH_TRACING=true
    return run_config(
        info.name,
        policy=context.policy,
        thread_id=thread,
        level=info.level,
        context=context,
        tags=getattr(args, "tag", None) or [],
        experiment=getattr(args, "experiment", None),
    )


def _add_eval_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="run StitchCUDA over suites (our evals/suite or a KernelBench checkout's level folders)",
        description="Run every problem of the suites; records go to OUT/results.jsonl as they finish, "
        "so a second call with the same --out resumes. Writes OUT/summary.json and OUT/table.md.",
    )
    p.add_argument("suites", nargs="+", help="suite folders (level1/, level2/, ...) or problem files")
    p.add_argument("--out", default="stitchcuda-eval", help="output folder (default: stitchcuda-eval)")
    p.add_argument("--policy", default=None, help="offline (default) or llm")
    p.add_argument(
        "--jobs", type=int, default=1, help="problems run at once (builds overlap; GPU work is serialised)"
    )
    p.add_argument("--only", default=None, help="regular expression on level/name, e.g. 'level1/(1|4)_'")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per problem")
    p.add_argument("run_args", nargs=argparse.REMAINDER, help="after --: extra arguments for each `run`")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    import re

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from evals.runner import discover, read_results, results_table, run_suite, write_summary
    from tools.problem import ProblemError

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
    run_args = [a for a in args.run_args if a != "--"]
    if args.policy:
        run_args += ["--policy", args.policy]
    done = {r["problem"] for r in read_results(out / "results.jsonl")}
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as bar:
        task = bar.add_task(
            "eval", total=len(problems), completed=len([p for p in problems if p.key in done])
        )

        def on_done(record: dict[str, Any]) -> None:
            speed = record.get("speedup_vs_eager")
            bar.console.print(
                f"{record['problem']}: {record.get('status')}"
                + (f" {speed:.2f}x" if speed else "")
                + f" ({record['seconds']:.0f} s)"
            )
            bar.advance(task)

        records = run_suite(problems, out, run_args, jobs=args.jobs, timeout_s=args.timeout, on_done=on_done)
    summary = write_summary(out, records, problems)
    print(results_table(records))
    overall = summary["all"]
    geo = overall.get("geomean_speedup_vs_eager")
    print(
        f"correct {overall['correctness_rate']:.0%} of {overall['problems']}; "
        f"geomean speedup vs eager {geo:.2f}x"
        if geo
        else f"correct {overall['correctness_rate']:.0%}"
    )
    return 0


def _add_graph_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("graph", help="print the graph as a Mermaid drawing")
    p.set_defaults(func=cmd_graph)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stitchcuda", description="PyTorch programs in, verified fast CUDA programs out."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_parser(sub)
    _add_eval_parser(sub)
    _add_graph_parser(sub)
    for module_name, function in (("rag_corpus.cli", "add_rag_commands"),):
        try:
            module = __import__(module_name, fromlist=[function])
        except ImportError:
            continue
        getattr(module, function)(sub)
    return parser


def cmd_graph(args: argparse.Namespace) -> int:
    from graph.build import graph

    print(graph.get_graph().draw_mermaid())
    return 0


class Progress:
    """Per-node progress on stderr: which node runs now, then what it reported."""

    def __init__(self, quiet: bool) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.quiet = quiet
        self.started: dict[str, float] = {}
        self.status: Any = None

    def task_started(self, name: str) -> None:
        self.started[name] = time.monotonic()
        if not self.quiet:
            label = {"verifier": "building, checking and timing", "profiler": "profiling"}.get(
                name, "working"
            )
            self.status = self.console.status(f"[bold]{name}[/]: {label} ...")
            self.status.start()

    def node_finished(self, name: str, update: dict[str, Any]) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        if self.quiet:
            return
        seconds = time.monotonic() - self.started.pop(name, time.monotonic())
        for line in update.get("log", []) if isinstance(update, dict) else []:
            self.console.print(f"[dim]{seconds:6.1f}s[/] {line}")

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()


def _stream(app: Any, payload: Any, config: dict[str, Any], context: Any, progress: Progress) -> None:
    for mode, chunk in app.stream(payload, config, context=context, stream_mode=["tasks", "updates"]):
        if mode == "tasks" and "input" in chunk:
            progress.task_started(chunk["name"])
        elif mode == "updates":
            for name, update in chunk.items():
                progress.node_finished(name, update or {})


def cmd_run(args: argparse.Namespace) -> int:
    from tools.problem import ProblemError, load_problem

    try:
        info = load_problem(args.problem)
    except ProblemError as exc:
        print(f"stitchcuda: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

    from langgraph.checkpoint.sqlite import SqliteSaver

    from graph.build import builder
    from graph.context import Context
    from graph.policy import UnknownPolicyError, get_policy

    out = Path(args.out or Path("stitchcuda-out") / info.name)
    out.mkdir(parents=True, exist_ok=True)
    context = Context(
        policy=args.policy,
        max_iterations=args.max_iterations,
        wall_time_s=args.wall_time,
        gpu_arch=args.arch,
        device=args.device,
        perf_trials=args.perf_trials,
        out_dir=str(out),
    )
    try:
        get_policy(context)
    except (UnknownPolicyError, ValueError) as exc:
        print(f"stitchcuda: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

    thread = args.thread or uuid.uuid4().hex[:12]
    config = {
        "configurable": {"thread_id": thread},
        "recursion_limit": 100,
        "run_name": f"stitchcuda:{info.name}",
    }
    config.update(_tracing_config(args, info, context, thread))
    progress = Progress(args.quiet)
    with SqliteSaver.from_conn_string(str(out / "checkpoints.sqlite")) as saver:
        app = builder.compile(checkpointer=saver, name="StitchCUDA")
        snapshot = app.get_state(config)
        if snapshot.values and snapshot.next:
            progress.console.print(f"resuming thread {thread} at {', '.join(snapshot.next)}")
            payload: Any = None
        elif snapshot.values and snapshot.values.get("report"):
            progress.console.print(f"thread {thread} already finished; reporting its result")
            payload = None
        else:
            progress.console.print(f"thread {thread} (resume with --thread {thread}); output in {out}")
            payload = {"problem_path": str(Path(args.problem).resolve())}
        try:
            if payload is not None or snapshot.next:
                _stream(app, payload, config, context, progress)
        except KeyboardInterrupt:
            progress.close()
            print(f"stitchcuda: interrupted; resume with --thread {thread}", file=sys.stderr)
            return 130
        except Exception as exc:  # a node crashed: the checkpoint keeps everything before it
            progress.close()
            print(
                f"stitchcuda: the run stopped: {type(exc).__name__}: {exc}; resume with --thread {thread}",
                file=sys.stderr,
            )
            return EXIT_FAILED
        finally:
            progress.close()
        final = app.get_state(config).values
    report = final.get("report") or {}
    status = report.get("status", final.get("status", "failed"))
    speed = report.get("speedup_vs_eager")
    summary = {
        "problem": info.name,
        "status": status,
        "reason": report.get("status_reason", final.get("status_reason", "")),
        "speedup_vs_eager": round(speed, 3) if speed else None,
        "out": str(out),
    }
    print(json.dumps(summary))
    return EXIT_CODES.get(status, EXIT_FAILED)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
