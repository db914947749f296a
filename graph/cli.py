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

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from tools.protocol import Finding

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
        help="strict: also check each new best program as KernelBench's harness would",
    )
    p.add_argument("--quiet", action="store_true", help="print only the final line")
    _add_sandbox_flag(p, defaults.sandbox)
    p.add_argument(
        "--hybrid-start",
        action=argparse.BooleanOptionalAction,
        default=defaults.hybrid_start,
        help="llm policy: offer the offline program as the coder's starting point (off for small-context models)",
    )
    _add_tracing_flags(p)
    p.set_defaults(func=cmd_run)


def _add_sandbox_flag(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument(
        "--sandbox",
        default=default,
        choices=["auto", "required", "off"],
        help="where generated and reference code runs (docs/sandbox.md): auto (default: the strongest layers "
        "this machine allows), required (fail when one is missing), off (debugging only)",
    )


def _use_sandbox(mode: str | None) -> bool:
    """Check the mode against this machine and hand it to every child (baselines, profilers); False
    (after saying why) when `required` meets a missing layer."""
    import os

    from tools.sandbox import SandboxError, platform_layers

    if mode is None:
        return True
    try:
        platform_layers(mode)
    except SandboxError as exc:
        print(f"stitchcuda: {exc}", file=sys.stderr)
        return False
    os.environ["STITCHCUDA_SANDBOX"] = mode
    return True


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
    _add_sandbox_flag(p, None)
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
    if not _use_sandbox(args.sandbox):
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


def _add_report_parser(sub: argparse._SubParsersAction) -> None:
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


def _add_check_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="hack checks of a candidate program: static (source) and dynamic (strict run on a GPU)",
        description="Print {verdict, findings, operator_coverage} as JSON. Verdict: hacked (any error "
        "finding), suspicious (any warning, e.g. PyTorch fallbacks), else clean. Exit codes: 0 clean, "
        "1 suspicious or hacked, 2 bad input. Without a GPU only the static part runs (a finding says so).",
    )
    p.add_argument("solution", help="the candidate program (defines ModelNew)")
    p.add_argument("--problem", required=True, help="its KernelBench-format reference problem")
    p.add_argument("--static-only", action="store_true", help="only the static checks (no build, no GPU)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds for the dynamic run")
    p.add_argument("--arch", default=None, help="CUDA architecture to build for (default: the GPU's)")
    p.add_argument("--perf-trials", type=int, default=30, help="timed calls in the dynamic run")
    p.add_argument("--sol-ms", type=float, default=None, help="speed-of-light floor of the problem, in ms")
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    """Static findings always; dynamic ones from a strict worker run when a GPU is here."""
    from tools import checks

    texts = {}
    for label, path in (("solution", args.solution), ("problem", args.problem)):
        try:
            texts[label] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"stitchcuda: {label} {path}: cannot be read ({exc})", file=sys.stderr)
            return EXIT_BAD_INPUT
    dynamic: list[Finding] = []
    coverage = None
    if not args.static_only:
        dynamic, coverage = _dynamic_findings(args, texts["problem"], texts["solution"])
    report = checks.hack_report(texts["solution"], dynamic)
    verdict = report["verdict"]
    print(
        json.dumps(
            {"verdict": verdict, "findings": report["findings"], "operator_coverage": coverage}, indent=2
        )
    )
    return 0 if verdict == "clean" else EXIT_FAILED


def _dynamic_findings(
    args: argparse.Namespace, problem: str, solution: str
) -> tuple[list[Finding], float | None]:
    import torch

    from tools.checks import finding

    if not torch.cuda.is_available():
        note = "the dynamic checks need a GPU (torch.cuda.is_available() is False); the verdict is the static one"
        return [finding("dynamic_checks_skipped", "info", note)], None
    from tools.evaluate import evaluate
    from tools.protocol import EvalRequest

    request = EvalRequest(
        action="verify",
        problem_name=Path(args.problem).stem,
        problem_source=problem,
        candidate_source=solution,
        device="cuda",
        mode="strict",
        dynamic_checks=True,
        perf_trials=args.perf_trials,
        timeout_s=args.timeout,
    )
    if args.arch:
        request["arch"] = args.arch
    if args.sol_ms:
        request["sol_ms"] = args.sol_ms
    response = evaluate(request, timeout_s=args.timeout)
    found: list[Finding] = list(response.get("findings") or [])
    status = response.get("status", "crashed")
    first_line = (response.get("message") or status).splitlines()[0]
    if status == "wrong_output" and not any(f.get("severity") == "error" for f in found):
        found.append(finding("fails_strict_check", "error", first_line))
    elif status not in ("passed", "wrong_output") and not any(f.get("severity") == "error" for f in found):
        found.append(finding("dynamic_run_failed", "warning", f"{status}: {first_line}"))
    elif status == "passed":
        found.append(finding("strict_run", "info", first_line))
    return found, response.get("operator_coverage")


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
    _add_check_parser(sub)
    _add_report_parser(sub)
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

    if not _use_sandbox(args.sandbox):
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
