"""One verification per problem, exactly as the verifier sends it, with where its time goes.

Why: the suite's throughput is bounded by the time each verification holds the GPU's device lock,
and a speedup is only as honest as the timing loop (docs/timing.md). This probe runs the first
program of the offline policy for a few problems through the sandboxed worker, one at a time, and
prints per problem: the verdict, candidate and eager times with their cv, the allocator's new
segments inside each contestant's timed calls (`cuda_mallocs`), the host time each takes to issue
a call (`issue_mean_ms`: the GPU idles that long in a timed call), and the worker's seconds per phase.

    python -m evals.device.verify_probe --write out/probe [PROBLEM ...]     # CPU machine (full install)
    python3 -m evals.device.verify_probe out/probe [--baselines]            # device machine (torch only)

With --baselines each verification is followed, on the same idle machine, by the baseline step's
eager measurement of the same problem (tools.baselines, the eval's harness, nothing cached): the
`eager_agreement` column is the baseline step's eager time over the verifier's, the quantity the
timing issue bounds at 3% and a loaded eval did not meet (docs/benchmarks.md).

PROBLEM is `level1/1_ReLU` style (a file of evals/suite); the default list covers streaming,
reductions, pooling, a conv chain and a launch-bound CNN. The device side writes
`$OUT/verify_probe.jsonl` (one response summary per problem) when $OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evals" / "suite"
DEFAULT_PROBLEMS = (
    "level1/1_ReLU",
    "level1/2_GELU",
    "level1/4_Softmax",
    "level1/6_SumReduction",
    "level1/10_MaxPool2d",
    "level1/5_LayerNorm",
    "level2/4_Conv2d_BatchNorm_ReLU",
    "level3/14_ResNet18",
)
PHASES = {
    "correctness": ("checking correctness",),
    "timing": ("timing candidate and eager side by side",),
    "profile": ("profiling for the hack checks",),
    "lock": ("waiting for the device lock",),
}


def suite_file(key: str) -> Path:
    """evals/suite/<level>/<stem>.py for a `level/stem` key."""
    level, stem = key.split("/")
    path = SUITE / level / f"{stem}.py"
    if not path.is_file():
        raise SystemExit(f"no such suite problem: {path}")
    return path


def first_program(key: str) -> tuple[Any, Any, str]:
    """CPU side (the full install): a suite problem's task, the offline policy's plan and its first
    program's source."""
    from codegen.policy import OfflinePolicy
    from graph.artifacts import Task

    path = suite_file(key)
    task = Task(name=path.stem, path=str(path), source=path.read_text())
    policy = OfflinePolicy()
    plan = policy.plan(task, None)
    return task, plan, policy.write(task, plan, 1).source


def write(out: Path, keys: list[str]) -> None:
    """CPU side: each problem's first offline program and the verifier's exact request for it."""
    from graph.context import Context
    from nodes.support.worker_client import eval_request

    out.mkdir(parents=True, exist_ok=True)
    context = Context()
    for key in keys:
        task, plan, source = first_program(key)
        request = eval_request(task, source, context, "verify", plan.model_dump())
        (out / f"{key.replace('/', '__')}.request.json").write_text(json.dumps(request))
        print(f"wrote {key}")


def summary(key: str, response: dict[str, Any]) -> dict[str, Any]:
    """The numbers the table prints, from one worker response."""
    timing = response.get("timing") or {}
    phases = response.get("phases") or {}
    row: dict[str, Any] = {
        "problem": key,
        "status": response.get("status"),
        "seconds": response.get("seconds"),
    }
    for who in ("candidate", "eager"):
        stats = timing.get(who) or {}
        row[f"{who}_ms"] = stats.get("mean_ms")
        row[f"{who}_cv"] = stats.get("cv")
        row[f"{who}_mallocs"] = stats.get("cuda_mallocs")
        for stat, name in (("issue_mean_ms", "issue_us"), ("issue_median_ms", "issue_median_us")):
            issue = stats.get(stat)
            row[f"{who}_{name}"] = round(issue * 1000.0, 1) if isinstance(issue, (int, float)) else None
    ratio = (timing.get("ratios") or {}).get("eager") or {}
    row["ratio_median"] = ratio.get("median")
    for name, labels in PHASES.items():
        row[f"{name}_s"] = round(sum(float(phases.get(label, 0.0)) for label in labels), 3)
    row["message"] = str(response.get("message", ""))[:160]
    return row


def _cell(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of the probe's rows."""
    head = (
        "| problem | status | ours ms (cv) | eager ms (cv) | median ratio | mallocs ours/eager "
        "| issue us ours/eager (mean; median) | correctness s | timing s | profile s | worker s |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['problem']} | {r['status']} | {_cell(r['candidate_ms'])} ({_cell(r['candidate_cv'])}) | "
            f"{_cell(r['eager_ms'])} ({_cell(r['eager_cv'])}) | {_cell(r['ratio_median'])} | "
            f"{_cell(r['candidate_mallocs'])}/{_cell(r['eager_mallocs'])} | "
            f"{_cell(r['candidate_issue_us'], 1)}/{_cell(r['eager_issue_us'], 1)}; "
            f"{_cell(r.get('candidate_issue_median_us'), 1)}/{_cell(r.get('eager_issue_median_us'), 1)} | "
            f"{_cell(r['correctness_s'], 1)} | "
            f"{_cell(r['timing_s'], 1)} | {_cell(r['profile_s'], 1)} | {_cell(r['seconds'], 1)} |"
        )
    return "\n".join(lines)


def baseline_eager(request: dict[str, Any], key: str) -> float | None:
    """The baseline step's eager time for the request's problem, measured now (no cache)."""
    from tools.baselines import measure_baselines

    with tempfile.TemporaryDirectory(prefix="stitch-probe-baselines-") as cache:
        answer = measure_baselines(
            request["problem_source"],
            key.split("/")[-1],
            modes=["eager"],
            perf_trials=int(request.get("perf_trials", 100)),
            harness=str(request.get("mode") or "kernelbench"),
            on_device=bool(request.get("inputs_on_device", False)),
            cache_dir=cache,
            refresh=True,
        )
    eager = (answer.get("baselines") or {}).get("eager") or {}
    value = eager.get("mean_ms")
    return float(value) if isinstance(value, (int, float)) else None


def probe(folder: Path, baselines: bool = False) -> list[dict[str, Any]]:
    """Device side: every request in `folder` through the sandboxed worker, one at a time (each
    followed by the baseline step's eager measurement when `baselines`)."""
    sys.path.insert(0, str(REPO))
    from tools.evaluate import evaluate

    rows = []
    out = os.environ.get("OUT")
    for path in sorted(folder.glob("*.request.json")):
        key = path.name.removesuffix(".request.json").replace("__", "/")
        request = json.loads(path.read_text())
        response = dict(evaluate(request, timeout_s=float(request.get("timeout_s", 600.0))))
        row = summary(key, response)
        if baselines:
            row["baseline_eager_ms"] = baseline_eager(request, key)
            if row["baseline_eager_ms"] and row["eager_ms"]:
                row["eager_agreement"] = round(row["baseline_eager_ms"] / row["eager_ms"], 4)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if out:
            with open(Path(out) / "verify_probe.jsonl", "a") as sink:
                sink.write(json.dumps(row) + "\n")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.device.verify_probe", description=__doc__.split("\n")[0]
    )
    parser.add_argument("folder", type=Path, help="where the requests are (device) or go (--write)")
    parser.add_argument("problems", nargs="*", help="level/stem keys for --write (default: a fixed mix)")
    parser.add_argument("--write", action="store_true", help="CPU side: write the requests")
    parser.add_argument(
        "--baselines", action="store_true", help="device side: also the baseline step's eager time"
    )
    args = parser.parse_args(argv)
    if args.write:
        write(args.folder, args.problems or list(DEFAULT_PROBLEMS))
        return 0
    rows = probe(args.folder, args.baselines)
    print(table(rows))
    if args.baselines:
        print("\n| problem | verifier eager ms | baseline eager ms | agreement |\n|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['problem']} | {_cell(r['eager_ms'])} | {_cell(r.get('baseline_eager_ms'))} | "
                f"{_cell(r.get('eager_agreement'), 4)} |"
            )
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
