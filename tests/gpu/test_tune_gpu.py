"""On a GPU: the worker's launch tuning over suite programs, as the profile node runs it.

For each program (planned, and for two problems also as a CUDA graph, whose captures are kept per
launch table), the worker's `tune` action runs in strict mode with a 20 s budget. Asserted: every
search answers; every kept trial kept the output (the search rejects the others); the tuned table
is never slower than the start beyond the noise (side-by-side speedup >= 0.97). Printed last: a table
of knobs changed, start and tuned times and the speedup.

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_tune_gpu.py --write out/tune-gpu
and run there (out/tune-gpu carried) with
  STITCH_TUNE_PROGRAMS=out/tune-gpu python -m pytest -q -s tests/gpu/test_tune_gpu.py
Knobs: STITCH_TUNE_ONLY=substring of labels, STITCH_TUNE_RESULTS=file (rows as JSON lines),
STITCH_TUNE_BUDGET=seconds per search (default 20).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(Path(__file__).parent)]  # run as a script (--write)

SUITE = REPO / "evals" / "suite"
PROBLEMS = (
    "level1/1_ReLU.py",
    "level1/5_LayerNorm.py",
    "level2/4_Conv2d_BatchNorm_ReLU.py",
    "level2/6_Scale_Bias_Tanh_Clamp.py",
    "level3/8_DenseBlock.py",
)
GRAPHED = ("level2/4_Conv2d_BatchNorm_ReLU.py", "level3/8_DenseBlock.py")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Each problem and its programs plus manifest.json in `folder`; needs codegen (the CPU machine)."""
    from codegen.emit.assemble import Options, assemble
    from codegen.schedule.plan import analyse
    from graph.artifacts import Task

    folder.mkdir(parents=True, exist_ok=True)
    manifest: list[dict[str, Any]] = []
    for relative in PROBLEMS:
        path = SUITE / relative
        (folder / path.name).write_text(path.read_text())
        analysis = analyse(Task(name=path.stem, path=str(path), source=path.read_text()))
        variants = [("", False)] + ([("graph", True)] if relative in GRAPHED else [])
        for suffix, graphed in variants:
            program = assemble(analysis, Options(arch=arch, cuda_graph=graphed))
            name = f"{path.stem}{'_' + suffix if suffix else ''}_program.py"
            (folder / name).write_text(program.source)
            label = f"{relative.removesuffix('.py')}{' ' + suffix if suffix else ''}"
            manifest.append({"label": label, "problem": path.name, "program": name})
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _tune(entry: dict[str, Any], folder: Path, budget: float) -> dict[str, Any]:
    from tools.evaluate import evaluate
    from tools.protocol import EvalRequest

    request = EvalRequest(
        action="tune",
        problem_name=entry["problem"],
        problem_source=(folder / entry["problem"]).read_text(),
        candidate_source=(folder / entry["program"]).read_text(),
        device="cuda",
        mode="strict",
        inputs_on_device=True,
        tune_budget_s=budget,
    )
    response = evaluate(request, timeout_s=budget + 240)
    answer = response.get("tune", {})
    return {
        "label": entry["label"],
        "status": response.get("status"),
        "message": response.get("message", ""),
        "launch": answer.get("launch", {}),
        "start_ms": answer.get("start_ms"),
        "tuned_ms": answer.get("tuned_ms"),
        "speedup": answer.get("speedup"),
        "trials": answer.get("trials", []),
        "complete": answer.get("complete"),
        "spent_s": answer.get("spent_s"),
        "device": response.get("device", ""),
    }


def test_tuning_answers_keeps_outputs_and_never_slows_a_program() -> None:
    folder = Path(os.environ.get("STITCH_TUNE_PROGRAMS", ""))
    if not (folder / "manifest.json").is_file():
        pytest.skip(
            "write the programs on the CPU first: python tests/gpu/test_tune_gpu.py --write out/tune-gpu"
        )
    only = os.environ.get("STITCH_TUNE_ONLY", "")
    budget = float(os.environ.get("STITCH_TUNE_BUDGET", "20"))
    entries = [e for e in json.loads((folder / "manifest.json").read_text()) if only in e["label"]]
    rows = [_tune(entry, folder, budget) for entry in entries]
    results = os.environ.get("STITCH_TUNE_RESULTS")
    if results:
        with open(results, "a") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    print("\n| program | knobs changed | start ms | tuned ms | speedup | trials | s |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        changed = ", ".join(f"{g}.{k}={v}" for g, knobs in row["launch"].items() for k, v in knobs.items())
        print(
            f"| {row['label']} | {changed or '-'} | {row['start_ms'] or '-'} | {row['tuned_ms'] or '-'} "
            f"| {row['speedup'] or '-'} | {len(row['trials'])} | {row['spent_s']} |"
        )
    for row in rows:
        assert row["status"] == "passed", (row["label"], row["message"])
        assert all(t.get("why") != "changed the output" or not t["kept"] for t in row["trials"])
        if row["speedup"] is not None:
            assert row["speedup"] >= 0.97, row


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", type=Path, required=True, help="folder for the programs and manifest.json")
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    written = write_programs(args.write, args.arch)
    print(f"wrote {len(written)} programs to {args.write}")
