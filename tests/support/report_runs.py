"""A recorded run folder for the report tests: report.json as finalize writes it, plus a profile report.

Why hand-made and not a real run: a real run needs a GPU for timings and Nsight Compute. The kernel
record is the REAL softmax NCU export (tests/fixtures/profiles/ncu) with the three FLOP-count columns
appended (the capture predates them); the attempts use the fields `graph.artifacts.Attempt` dumps.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from conftest import FIXTURES

from tools.profilers import ncu

FLOP_FIELDS = ("fadd_thread_inst", "fmul_thread_inst", "ffma_thread_inst")
SOFTMAX_FLOPS = {"fadd": 1_000_000_000.0, "fmul": 200_000_000.0, "ffma": 400_000_000.0}  # 2.0e9 FLOPs


def softmax_kernel_with_flops() -> dict[str, Any]:
    rows = list(
        csv.reader(io.StringIO((FIXTURES / "profiles" / "ncu" / "softmax_candidate.raw.csv").read_text()))
    )
    rows[0] += [ncu.FIELD_METRICS[f][0] for f in FLOP_FIELDS]
    rows[1] += ["inst"] * 3
    for row in rows[2:]:
        row += [str(SOFTMAX_FLOPS["fadd"]), str(SOFTMAX_FLOPS["fmul"]), str(SOFTMAX_FLOPS["ffma"])]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    (kernel,) = ncu.parse_records(out.getvalue())
    return kernel.to_dict()


def attempt(
    candidate: int, mode: str, status: str, ms: float | None, phases: dict[str, float]
) -> dict[str, Any]:
    return {
        "candidate": candidate,
        "mode": mode,
        "status": status,
        "candidate_ms": ms,
        "speedup_vs_eager": 1.0 / ms if ms else None,
        "build_seconds": 10.0,
        "eval_seconds": sum(phases.values()),
        "phases": phases,
        "summary": f"{mode} turn",
        "verdict": "clean",
    }


def run_report() -> dict[str, Any]:
    """Three candidates: a build error, a fix that passes at 2 ms, an optimisation at 1 ms (the best)."""
    passed = {
        "checking correctness": 3.0,
        "timing Model": 1.5,
        "timing ModelNew": 1.5,
        "profiling for the hack checks": 2.0,
    }
    return {
        "problem": "level1/4_Softmax",
        "status": "verified",
        "status_reason": "candidate 3 passed 5 correctness trials",
        "policy": "offline",
        "device": "NVIDIA H200",
        "speedup_vs_eager": 1.0,
        "eager_ms": 1.0,
        "candidate_ms": 1.0,
        "candidate_id": 3,
        "attempts": [
            attempt(1, "write", "build_error", None, {}),
            attempt(2, "fix", "passed", 2.0, passed),
            attempt(3, "optimize", "passed", 1.0, passed),
        ],
        "node_seconds": {"planner": 1.0, "coder": 2.0, "verifier": 50.0, "profiler": 7.0, "finalize": 0.1},
        "plan": {"total_flops": 2_684_354_560, "total_bytes": 4_294_967_296, "groups": []},
    }


def make_run_dir(folder: Path) -> Path:
    """folder/report.json and folder/profiles/candidate-3.json (H200 ceilings, one softmax kernel)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(run_report()))
    profile = {
        "candidate": 3,
        "ncu": {"status": "ok", "kernels": [softmax_kernel_with_flops()]},
        "ceilings": {
            "gpu": "NVIDIA H200",
            "copy_bandwidth": 4.25e12,
            "fp32_flops": 51.2e12,
            "tf32_flops": 396e12,
            "bf16_flops": 769e12,
            "source": "measured",
        },
    }
    (folder / "profiles").mkdir(exist_ok=True)
    (folder / "profiles" / "candidate-3.json").write_text(json.dumps(profile))
    return folder
