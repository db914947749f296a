"""The `stitchcuda` command line.

    stitchcuda run PROBLEM [--out DIR] [--policy offline|llm] [--thread ID] ...
    stitchcuda eval SUITE... [--out DIR]  # a suite, then OUT/report.html
    stitchcuda report EVAL_OUT            # redraw an eval's report.html and each run's HTML twin
    stitchcuda graph                      # the graph as a Mermaid drawing
    stitchcuda llm serve-local [--port P] # a small real model behind transformers serve
    stitchcuda rag build|ingest|query|eval
    stitchcuda rl dataset|score|train|plot|verl-data

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
from typing import TYPE_CHECKING, Any, cast

from graph.cli_check import add_check_parser

# The exit codes, re-exported: callers and tests read them from graph.cli.
from graph.cli_common import EXIT_BAD_INPUT as EXIT_BAD_INPUT
from graph.cli_common import EXIT_CODES as EXIT_CODES
from graph.cli_common import EXIT_FAILED as EXIT_FAILED
from graph.cli_common import EXIT_UNVERIFIED as EXIT_UNVERIFIED
from graph.cli_common import EXIT_VERIFIED as EXIT_VERIFIED
from graph.cli_common import add_sandbox_flag, use_sandbox
from graph.cli_eval import add_eval_parser, add_report_parser

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


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
    p.add_argument(
        "--tune-budget",
        type=float,
        default=defaults.tune_budget_s,
        help="seconds of launch-knob search per passing candidate on a GPU (0: off; docs/autotuning.md)",
    )
    p.add_argument(
        "--compile-modes",
        default=defaults.compile_modes,
        help="torch.compile modes timed beside candidate and eager in the verifier (comma list; default none)",
    )
    p.add_argument(
        "--harness",
        default=defaults.tolerance_mode,
        choices=["strict", "kernelbench"],
        help="strict (default: our stronger checks) or kernelbench (KernelBench's rules and process state)",
    )
    p.add_argument(
        "--kernelbench-check",
        action=argparse.BooleanOptionalAction,
        default=defaults.kernelbench_check,
        help="strict: also check the returned program once as KernelBench's harness would",
    )
    p.add_argument("--quiet", action="store_true", help="print only the final line")
    add_sandbox_flag(p, defaults.sandbox)
    p.add_argument(
        "--hybrid-start",
        action=argparse.BooleanOptionalAction,
        default=defaults.hybrid_start,
        help="llm policy: offer the offline program as the coder's starting point (off for small-context models)",
    )
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


def _add_graph_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("graph", help="print the graph as a Mermaid drawing")
    p.set_defaults(func=cmd_graph)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stitchcuda", description="PyTorch programs in, verified fast CUDA programs out."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_parser(sub)
    add_eval_parser(sub)
    add_check_parser(sub)
    add_report_parser(sub)
    _add_graph_parser(sub)
    for module_name, function in (
        ("rag_corpus.cli", "add_rag_commands"),
        ("nodes.llm.cli", "add_llm_commands"),
        ("rl.cli", "add_rl_commands"),
    ):
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
        from rich.markup import escape

        seconds = time.monotonic() - self.started.pop(name, time.monotonic())
        for line in update.get("log", []) if isinstance(update, dict) else []:
            # escape: node lines hold brackets ("custom kernels for [sub, relu]") that rich reads as markup
            self.console.print(f"[dim]{seconds:6.1f}s[/] {escape(line)}")

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

    if not use_sandbox(args.sandbox):
        return EXIT_BAD_INPUT
    out = Path(args.out or Path("stitchcuda-out") / info.name)
    out.mkdir(parents=True, exist_ok=True)
    context = Context(
        sandbox=args.sandbox,
        policy=args.policy,
        max_iterations=args.max_iterations,
        wall_time_s=args.wall_time,
        gpu_arch=args.arch,
        device=args.device,
        perf_trials=args.perf_trials,
        tune_budget_s=args.tune_budget,
        compile_modes=args.compile_modes,
        tolerance_mode=args.harness,
        kernelbench_check=args.kernelbench_check,
        out_dir=str(out),
        hybrid_start=args.hybrid_start,
    )
    try:
        get_policy(context)
    except (UnknownPolicyError, ValueError) as exc:
        print(f"stitchcuda: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

    thread = args.thread or uuid.uuid4().hex[:12]
    config: dict[str, Any] = {
        "configurable": {"thread_id": thread},
        "recursion_limit": 100,
        "run_name": f"stitchcuda:{info.name}",
    }
    config.update(_tracing_config(args, info, context, thread))
    progress = Progress(args.quiet)
    with SqliteSaver.from_conn_string(str(out / "checkpoints.sqlite")) as saver:
        app = builder.compile(checkpointer=saver, name="StitchCUDA")
        snapshot = app.get_state(cast("RunnableConfig", config))
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
        final = app.get_state(cast("RunnableConfig", config)).values
    report = final.get("report") or {}
    status = report.get("status", final.get("status", "failed"))
    speed = report.get("speedup_vs_eager")
    summary = {
        "problem": info.name,
        "status": status,
        "reason": report.get("status_reason", final.get("status_reason", "")),
        "speedup_vs_eager": round(speed, 3) if speed else None,
        "speed": (report.get("speed") or {}).get(
            "kind"
        ),  # faster, within_noise, slower (nodes.support.speed)
        "out": str(out),
    }
    print(json.dumps(summary))
    return EXIT_CODES.get(status, EXIT_FAILED)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:  # `stitchcuda eval SUITE -- --max-iterations 3`: the rest is for each run
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    if passthrough:
        if not hasattr(args, "run_args"):
            parser.error("arguments after -- are only for `eval`")
        args.run_args = passthrough
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
