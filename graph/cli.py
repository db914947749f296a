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
    p.set_defaults(func=cmd_run)


def _add_graph_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("graph", help="print the graph as a Mermaid drawing")
    p.set_defaults(func=cmd_graph)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stitchcuda", description="PyTorch programs in, verified fast CUDA programs out."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_parser(sub)
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
