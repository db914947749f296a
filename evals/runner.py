"""Run StitchCUDA over a suite: one `stitchcuda run` per problem, then its baselines, records kept as they finish.

Each problem runs in its own process (`python -m graph.cli run ...`), several at a time, so
independent candidates build in parallel; the evaluation worker and the baseline process serialise
GPU work with one file lock per GPU, so timings are not disturbed by the neighbours. After a run whose
last evaluation faulted, the GPU is probed (evals.gpu_health): a GPU that fails it ends the local eval. After a problem's run,
its PyTorch baselines (eager and the torch.compile modes, tools.baselines: same GPU, same timing
method, cached per machine) are measured and every speedup in the record is against them: vs eager
and vs the best compile mode. Without baselines (no GPU, --no-baselines) the speedup vs eager is the
verifier's own, from the same worker run as the candidate's time.

Every finished problem is appended to `OUT/results.jsonl` at once (one JSON line, flushed and
synced), so a crash loses at most the problems in flight. A second invocation with the same OUT
skips what is already recorded, and each problem's graph run uses a thread id derived from its key,
so a problem interrupted mid-run resumes from its last checkpoint instead of starting again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.breakdown import breakdown, breakdown_table
from evals.gpu_health import LocalHealth, drop_line, read_drops
from evals.metrics import summarize, summary_table

if TYPE_CHECKING:
    from evals.ray_executor import RayOptions

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CLI = (sys.executable, "-m", "graph.cli")
REPORT_FIELDS = (
    "status",
    "status_reason",
    "candidate_ms",
    "iterations",
    "build_s",
    "covered_ops",
    "uncovered_ops",
    "device",
)


@dataclass(frozen=True)
class SuiteProblem:
    key: str  # "level1/1_ReLU"
    level: str
    path: Path


@dataclass
class BaselineConfig:
    """How the runner measures each problem's PyTorch baselines (tools.baselines)."""

    enabled: bool = False
    modes: tuple[str, ...] = ("eager", "default", "max-autotune-no-cudagraphs", "reduce-overhead")
    device: str = "cuda"
    perf_trials: int = 100
    harness: str = "kernelbench"  # the worker's harness mode: it picks the timing method
    inputs_on_device: bool = False
    timeout_s: float = 1800.0
    cache_dir: str | None = None


def run_arg(run_args: Sequence[str], name: str) -> str | None:
    """The value of `--name V` or `--name=V` among the arguments passed through to each `run`."""
    value = None
    for i, arg in enumerate(run_args):
        if arg == name and i + 1 < len(run_args):
            value = run_args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def baseline_config(
    enabled: bool | None, modes_text: str, timeout_s: float, run_args: Sequence[str]
) -> BaselineConfig:
    """Baselines timed like the runs' candidates: their device, trial count and harness mode.

    enabled None means: on when the runs use CUDA and a GPU is present. ValueError for unknown modes.
    """
    from graph.context import Context
    from tools.baselines import MODES

    defaults = Context()
    device = run_arg(run_args, "--device") or defaults.device
    if enabled is None:
        import torch

        enabled = device == "cuda" and torch.cuda.is_available()
    modes = tuple(m.strip() for m in modes_text.split(",") if m.strip())
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ValueError(
            f"unknown baseline mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(MODES)}"
        )
    return BaselineConfig(
        enabled=bool(enabled),
        modes=modes,
        device=device,
        perf_trials=int(run_arg(run_args, "--perf-trials") or defaults.perf_trials),
        harness=run_arg(run_args, "--harness") or defaults.tolerance_mode,
        inputs_on_device=defaults.inputs_on_device,
        timeout_s=timeout_s,
    )


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
    unique: dict[str, SuiteProblem] = {}
    for problem in found:
        unique.setdefault(problem.key, problem)
    return list(unique.values())


# ----------------------------------------------------------------------------------------------
# The results store
# ----------------------------------------------------------------------------------------------


def read_results(path: Path) -> list[dict[str, Any]]:
    """Every complete record; a line cut short by a crash is skipped. The last record of a key wins."""
    if not path.exists():
        return []
    records: dict[str, dict[str, Any]] = {}
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "problem" in record:
            records[record["problem"]] = record
    return list(records.values())


def append_record(path: Path, record: dict[str, Any]) -> None:
    """One JSON line, on a line of its own even after a torn write, flushed to disk."""
    with path.open("ab") as fh:
        if fh.tell() > 0:
            with path.open("rb") as tail:
                tail.seek(-1, os.SEEK_END)
                if tail.read(1) != b"\n":
                    fh.write(b"\n")
        fh.write(json.dumps(record).encode() + b"\n")
        fh.flush()
        os.fsync(fh.fileno())


# ----------------------------------------------------------------------------------------------
# One problem
# ----------------------------------------------------------------------------------------------


def thread_id(key: str) -> str:
    """A stable checkpoint thread per problem: a rerun resumes an interrupted graph run."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", key).strip("-")[:40]
    return f"eval-{slug}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def hack_verdict(report: dict[str, Any], solution: Path) -> tuple[str | None, str | None]:
    """(verdict, where it came from): the run's own hack check if it made one, else the static check."""
    for value in (report.get("verdict"), (report.get("hack_check") or {}).get("verdict")):
        if isinstance(value, str):
            return value, "report"
    if not solution.exists():
        return None, None
    try:
        from tools.checks import hack_report
    except ImportError:
        return None, None
    try:
        return str(hack_report(solution.read_text())["verdict"]), "static"
    except Exception as exc:  # the checker must not sink the suite run; the record says why
        return None, f"static check failed: {type(exc).__name__}: {exc}"


def record_from_report(report: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    record: dict[str, Any] = {k: report.get(k) for k in REPORT_FIELDS}
    attempts = report.get("attempts", []) or []
    record["built"] = any(a.get("status") not in ("build_error", None) for a in attempts)
    # The last evaluation's worker status: a fault there may be the GPU's (evals.gpu_health).
    record["last_attempt_status"] = attempts[-1].get("status") if attempts else None
    record["verifier_eager_ms"] = report.get("eager_ms")
    record["verifier_eager_median_ms"] = report.get("eager_median_ms")
    record["verifier_speedup_vs_eager"] = report.get("speedup_vs_eager")
    record["speed"] = (report.get("speed") or {}).get("kind")  # faster / within_noise / slower / untimed
    record["verifier_compile_ms"] = report.get("compile_ms") or {}
    record["verdict"], record["verdict_source"] = hack_verdict(report, run_dir / "solution.py")
    record["operator_coverage"] = (report.get("hack_check") or {}).get("operator_coverage")
    plan = report.get("plan") or {}  # one forward's work: the eval report's roofline reads it
    record["work_flops"], record["work_bytes"] = plan.get("total_flops"), plan.get("total_bytes")
    record["attempts"] = [compact_attempt(a) for a in attempts]
    return record


ATTEMPT_FIELDS = ("candidate", "mode", "status", "verdict", "speedup_vs_eager", "summary", "message")
ATTEMPT_TEXT_CHARS = 240  # per text field: the records stay small enough to carry between device calls


def compact_attempt(attempt: dict[str, Any]) -> dict[str, Any]:
    """One coder -> verifier round as the suite record keeps it: what was tried and what the worker
    said, so a demotion or a failure can be read from results.jsonl when the run folders are gone."""
    kept: dict[str, Any] = {}
    for key in ATTEMPT_FIELDS:
        value = attempt.get(key)
        if value in (None, ""):
            continue
        kept[key] = value[:ATTEMPT_TEXT_CHARS] if isinstance(value, str) else value
    return kept


def add_speedups(record: dict[str, Any], baselines: dict[str, Any] | None) -> None:
    """speedup_vs_eager / _vs_compile, each a ratio of times taken side by side where possible.

    vs eager: the verifier's own ratio (candidate and eager interleaved in one quiet window), else
    the candidate against the baseline step's eager. vs compile: the verifier's ratio times the
    baseline step's eager/compile ratio of the best mode (also taken side by side), else the
    candidate against the best compile time. `eager_agreement` is the baseline step's eager time
    over the verifier's: two measurements of one thing, which a quiet machine keeps near 1.
    """
    from tools.baselines import speedups

    record["speedup_vs_eager"] = None
    record["speedup_vs_compile"] = None
    record["speedup_source"] = None
    side_by_side = record.get("verifier_speedup_vs_eager")
    if baselines is not None:
        entries = baselines.get("baselines") or {}
        record["baseline_status"] = baselines.get("status")
        record["baselines"] = {mode: entry.get("mean_ms") for mode, entry in entries.items()}
        record["baseline_errors"] = {
            mode: entry["error"] for mode, entry in entries.items() if "error" in entry
        }
        record.update(speedups(record.get("candidate_ms"), baselines))
        if record["speedup_vs_eager"] is not None:
            record["speedup_source"] = "baselines"
        eager, verifier_eager = record.get("baseline_eager_ms"), record.get("verifier_eager_ms")
        if eager and verifier_eager:
            record["eager_agreement"] = round(eager / verifier_eager, 4)
        median, verifier_median = (
            (entries.get("eager") or {}).get("median_ms"),
            record.get("verifier_eager_median_ms"),
        )
        record["baseline_eager_median_ms"] = median
        if median and verifier_median:
            record["eager_agreement_median"] = round(median / verifier_median, 4)
        best = entries.get(record.get("best_compile_mode") or "") or {}
        if side_by_side and best.get("eager_side_by_side_ms") and best.get("mean_ms"):
            record["speedup_vs_compile"] = side_by_side * best["mean_ms"] / best["eager_side_by_side_ms"]
    if side_by_side:
        record["speedup_vs_eager"] = side_by_side
        record["speedup_source"] = "side_by_side"
    same_rounds = record.get("verifier_compile_ms") or {}
    if same_rounds and record.get("candidate_ms"):  # compile modes timed in the candidate's own rounds
        mode, ms = min(same_rounds.items(), key=lambda item: item[1])
        record["best_compile_mode"], record["best_compile_ms"] = mode, ms
        record["speedup_vs_compile"] = ms / record["candidate_ms"]


def runs_on_cuda(run_args: Sequence[str]) -> bool:
    """Whether each `run` uses CUDA (its --device, else the Context's default)."""
    from graph.context import Context

    return (run_arg(run_args, "--device") or Context().device) == "cuda"


def where_it_ran(executor: str) -> dict[str, Any]:
    """executor ("local" or "ray"), the node's host name and the GPU(s) this process may use."""
    import socket

    return {
        "executor": executor,
        "node": socket.gethostname(),
        "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", "") or None,
    }


def run_one(
    problem: SuiteProblem,
    out: Path,
    run_args: Sequence[str],
    timeout_s: float,
    baseline: BaselineConfig | None = None,
    cli: Sequence[str] = DEFAULT_CLI,
    executor: str = "local",
) -> dict[str, Any]:
    """Run the CLI on one problem, measure its baselines and return its results record.

    The run's process starts in the repository (cwd=REPO), so every path it gets is absolute: a
    relative `out` is taken from this process's folder, as the caller meant it.
    """
    run_dir = out.resolve() / "runs" / problem.key
    started = time.monotonic()
    started_at = time.time()
    cmd = [
        *cli,
        "run",
        str(problem.path.resolve()),
        "--out",
        str(run_dir),
        "--quiet",
        "--thread",
        thread_id(problem.key),
    ]
    cmd += list(run_args)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        code, stderr = -1, f"timed out after {timeout_s:.0f} s"
    record: dict[str, Any] = {"problem": problem.key, "level": problem.level, "exit_code": code}
    report_path = run_dir / "report.json"
    report = None
    if report_path.exists() and code != -1:
        try:
            report = json.loads(report_path.read_text())
        except ValueError:
            report = None
    if report is not None:
        record |= record_from_report(report, run_dir)
    else:
        tail = [line for line in (stderr or "").strip().splitlines() if line.strip()][-1:]
        record |= {"status": "failed", "status_reason": tail[0] if tail else "no report", "built": False}
        record["last_attempt_status"] = "no_report"  # the run died or timed out
    measured = None
    if baseline is not None and baseline.enabled:
        from tools.baselines import measure_baselines

        measured = measure_baselines(
            problem.path.read_text(),
            problem.path.stem,
            modes=baseline.modes,
            device=baseline.device,
            perf_trials=baseline.perf_trials,
            harness=baseline.harness,
            on_device=baseline.inputs_on_device,
            cache_dir=baseline.cache_dir,
            timeout_s=baseline.timeout_s,
        )
    add_speedups(record, measured)
    record["seconds"] = round(time.monotonic() - started, 1)
    record["breakdown"] = breakdown(report, measured, record["seconds"])
    record["started_at"], record["finished_at"] = round(started_at, 1), round(time.time(), 1)
    record.update(where_it_ran(executor))
    return record


# ----------------------------------------------------------------------------------------------
# The suite
# ----------------------------------------------------------------------------------------------


def run_suite(
    problems: Sequence[SuiteProblem],
    out: Path,
    run_args: Sequence[str] = (),
    jobs: int = 1,
    timeout_s: float = 3600.0,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    baseline: BaselineConfig | None = None,
    cli: Sequence[str] = DEFAULT_CLI,
    on_start: Callable[[SuiteProblem], None] | None = None,
    ray: RayOptions | None = None,
    health_probe: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Run every problem not yet in OUT/results.jsonl; returns the records of `problems` (old and new).

    ray: run each problem as a Ray task (evals.ray_executor) instead of `jobs` local threads.
    health_probe: locally, the command that checks the GPU after a suspect run (evals.gpu_health;
    None: tools.worker.probe, for CUDA runs only); the Ray executor takes its own in RayOptions.
    """
    out = out.resolve()  # the runs start in the repository: a relative OUT means this folder's
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    records = read_results(results_path)
    done = {r["problem"] for r in records}
    todo = [p for p in problems if p.key not in done]
    lock = threading.Lock()

    def keep(record: dict[str, Any]) -> None:
        with lock:
            append_record(results_path, record)
            records.append(record)
            if on_done:
                on_done(record)

    health = LocalHealth(out, health_probe, health_probe is not None or runs_on_cuda(run_args))
    left: list[str] = []

    def run_local(problem: SuiteProblem) -> None:
        if health.failed.is_set():  # the GPU failed its probe: nothing more runs on it
            left.append(problem.key)
            return
        if on_start:
            on_start(problem)
        record = run_one(problem, out, run_args, timeout_s, baseline, cli)
        if health.keep(record):
            keep(record)
        else:
            left.append(problem.key)

    if ray is not None:
        for record in ray.run(todo, out, run_args, timeout_s, baseline, cli, on_start):
            keep(record)
    else:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(run_local, todo))
    if left:
        print(
            f"stitchcuda: the GPU failed its health probe; {len(left)} problem(s) not recorded (the next "
            f"eval with this --out runs them): {', '.join(sorted(left))}",
            file=sys.stderr,
        )
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
    """Per-problem Markdown table (docs/benchmarks.md, table.md)."""
    lines = [
        "| problem | status | verdict | candidate ms | eager ms | best compile ms (mode) | vs eager | vs compile "
        "| iterations | build s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: _sort_key(r["problem"])):
        eager = r.get("baseline_eager_ms") or r.get("verifier_eager_ms")
        best = r.get("best_compile_ms")
        best_text = f"{best:.3f} ({r.get('best_compile_mode')})" if best else "-"
        lines.append(
            f"| {r['problem']} | {r.get('status')} | {r.get('verdict') or '-'} | {_fmt(r.get('candidate_ms'), '.3f')} | "
            f"{_fmt(eager, '.3f')} | {best_text} | {_fmt(r.get('speedup_vs_eager'), '.2f')} | "
            f"{_fmt(r.get('speedup_vs_compile'), '.2f')} | {r.get('iterations', '-')} | {_fmt(r.get('build_s'), '.1f')} |"
        )
    return "\n".join(lines) + "\n"


def _sort_key(key: str) -> tuple[str, int, str]:
    level, _, name = key.partition("/")
    number = name.split("_", 1)[0]
    return level, int(number) if number.isdigit() else 0, name


def write_summary(
    out: Path, records: Sequence[dict[str, Any]], problems: Sequence[SuiteProblem]
) -> dict[str, Any]:
    """OUT/summary.json (metrics per level and overall) and OUT/table.md (summary + per problem)."""
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(records, totals_by_level(problems))
    summary["generated_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    summary["recorded"] = len(records)
    summary["dropped_gpus"] = read_drops(out)  # GPUs a failed health probe took out (evals.gpu_health)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    text = "# StitchCUDA eval\n\n## Summary\n\n" + summary_table(summary) + "\n\n"
    if summary["dropped_gpus"]:
        text += "## Dropped GPUs\n\n" + "".join(f"- {drop_line(d)}\n" for d in summary["dropped_gpus"]) + "\n"
    text += "## Problems\n\n" + results_table(records)
    text += "\n## Where the time goes (seconds)\n\n" + breakdown_table(records)
    (out / "table.md").write_text(text)
    return summary
