"""How stable are our timings? Every suite problem's eager reference (and a solution, if given) timed twice.

    python -m evals.benchmarks.stability OUT_DIR [--suite evals/suite] [--solutions DIR]
        [--harness kernelbench|strict] [--perf-trials 100] [--passes 2] [--only REGEX]

Why: a speedup is a ratio of two timings taken minutes apart, so the same program timed twice in one
run must agree; the target is a median relative difference of at most 2% over the suite. The script
makes `--passes` passes over the whole suite (not back-to-back repeats, so drift between problems
shows up), each time constructing the model and drawing its inputs afresh under the seed, and times
them with tools.worker.timing (the worker's method for `--harness`). The relative difference of a problem is
(max - min) / min over its passes, for the mean (the headline) and the median of the timed calls.

--solutions DIR: a folder holding solution files as DIR/<level>/<name>.py, DIR/<name>.py, or an eval
output folder (DIR/runs/<level>/<name>/solution.py); each solution found is timed the same way.
Solutions run in this process (they are programs we trust here; the worker isolates unknown ones).

Writes OUT_DIR/stability.json and prints the table last. Needs only torch, the standard library and
this repository's tools/.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools import baselines, build  # noqa: E402
from tools.problem import exec_problem_source, select_problem_files  # noqa: E402
from tools.worker import correctness, gpu_lock, timing  # noqa: E402

TARGET = 0.02


def find_solution(root: Path | None, level: str, name: str) -> Path | None:
    if root is None:
        return None
    for candidate in (
        root / level / f"{name}.py",
        root / f"{name}.py",
        root / "runs" / level / name / "solution.py",
    ):
        if candidate.is_file():
            return candidate
    return None


def load_solution(path: Path) -> types.ModuleType:
    module = types.ModuleType(f"stitch_solution_{path.stem}")
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


def time_once(
    problem: types.ModuleType,
    solution: types.ModuleType | None,
    device: torch.device,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One pass over one problem: fresh model(s) and inputs, then the timed calls."""
    model = baselines.construct_model(problem, device, torch.float32, 42)
    correctness.set_seed(42)  # drawn on the device: the same seeded values, without multi-GB CPU draws
    inputs = correctness.draw_inputs(problem.get_inputs, device, True)
    timed: dict[str, Any] = {"eager": model}
    if solution is not None:
        correctness.set_seed(42)
        init = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_init_inputs()]
        correctness.set_seed(42)
        timed["solution"] = solution.ModelNew(*init).to(device)
    out: dict[str, Any] = {}
    for who, fn in timed.items():
        with torch.no_grad():  # as the baselines are timed
            stats = timing.time_forward(fn, inputs, device, 3, args.perf_trials, None, method=args.harness)
        out[who] = {"mean_ms": stats["mean_ms"], "median_ms": stats["median_ms"], "trials": stats["trials"]}
    del timed, model, inputs
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def relative_spread(values: list[float]) -> float | None:
    values = [v for v in values if v]
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / min(values)


def table(rows: list[dict[str, Any]], passes: int) -> str:
    head = "| problem | " + " | ".join(f"eager ms ({i + 1})" for i in range(passes))
    head += " | eager diff | median-stat diff | solution diff |"
    lines = [head, "|" + "---|" * (passes + 4)]
    for row in rows:
        means = " | ".join("-" if m is None else f"{m:.4g}" for m in row["eager_means"])
        cells = [row.get("eager_diff"), row.get("eager_median_diff"), row.get("solution_diff")]
        text = " | ".join("-" if c is None else f"{c:.2%}" for c in cells)
        status = f" ({row['error']})" if row.get("error") else ""
        lines.append(f"| {row['problem']}{status} | {means} | {text} |")
    return "\n".join(lines)


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for key, label in (
        ("eager_diff", "eager"),
        ("eager_median_diff", "eager, median stat"),
        ("solution_diff", "solutions"),
    ):
        values = [r[key] for r in rows if r.get(key) is not None]
        if values:
            median = statistics.median(values)
            verdict = "meets" if median <= TARGET else "MISSES"
            lines.append(
                f"{label}: median relative difference {median:.2%} over {len(values)} problems "
                f"(max {max(values):.2%}); {verdict} the {TARGET:.0%} target"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="output folder (stability.json)")
    parser.add_argument(
        "--suite", nargs="+", default=[str(REPO / "evals" / "suite")], help="suite folders or files"
    )
    parser.add_argument("--solutions", help="folder with solutions (see the module docstring)")
    parser.add_argument(
        "--harness", default="kernelbench", choices=["kernelbench", "strict"], help="timing method"
    )
    parser.add_argument("--perf-trials", type=int, default=100)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--only", help="regular expression on level/name")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--arch", default="sm_90", help="for building solutions")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("stability: no CUDA device here", file=sys.stderr)
        return 2
    baselines.pin_precision()
    build.install_cached_load_inline(args.arch, build.default_cache_dir())
    files = select_problem_files(args.suite, args.only)
    solutions_root = Path(args.solutions) if args.solutions else None
    problems: dict[str, dict[str, Any]] = {}
    for file in files:
        key = f"{file.parent.name}/{file.stem}"
        problems[key] = {"file": file, "solution": find_solution(solutions_root, file.parent.name, file.stem)}
    passes: dict[str, list[dict[str, Any]]] = {key: [] for key in problems}
    errors: dict[str, str] = {}
    started = time.monotonic()
    lock = gpu_lock.lock_path(build.default_cache_dir(), device)
    for index in range(args.passes):
        for key, info in problems.items():
            if key in errors:
                continue
            print(f"[stability] pass {index + 1}/{args.passes} {key}", file=sys.stderr, flush=True)
            try:
                problem = exec_problem_source(info["file"].read_text(), info["file"].stem, str(info["file"]))
                solution = load_solution(info["solution"]) if info["solution"] else None
                with gpu_lock.exclusive(lock):
                    passes[key].append(time_once(problem, solution, device, args))
            except Exception as exc:  # one broken problem or solution must not end the run
                errors[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    rows = []
    for key, runs in passes.items():
        row: dict[str, Any] = {"problem": key, "passes": runs, "error": errors.get(key)}
        row["eager_means"] = [r["eager"]["mean_ms"] for r in runs] + [None] * (args.passes - len(runs))
        row["eager_diff"] = relative_spread([r["eager"]["mean_ms"] for r in runs])
        row["eager_median_diff"] = relative_spread([r["eager"]["median_ms"] for r in runs])
        row["solution_diff"] = relative_spread([r["solution"]["mean_ms"] for r in runs if "solution" in r])
        rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = summary_lines(rows)
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "args": {k: v for k, v in vars(args).items()},
        "seconds": round(time.monotonic() - started, 1),
        "summary": summary,
        "rows": [{k: v for k, v in r.items()} for r in rows],
    }
    (out / "stability.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"device: {report['device']}; torch {report['torch']}; {report['seconds']} s")
    print(table(rows, args.passes))
    for line in summary:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
