"""The adversarial suite on a GPU: every cheat caught, every honest program passing (skips without CUDA).

Each candidate in tests/candidates/{adversarial,honest} declares `# harness-expect: problem=...
static=... strict=...` (read with tests/support/candidates.py, which also splices in a shared base). Here each one runs through real worker processes in strict mode (the
default) and in KernelBench mode; a table shows, per candidate, the static verdict, the strict
status and findings, the operator coverage and whether KernelBench's own rules were fooled.

    pytest tests/gpu/test_adversarial_gpu.py -s        # the table is printed; several minutes cold

STITCHCUDA_ADV_ONLY (a regular expression on the candidate's stem) runs a subset, for machines that
cap one command's time; STITCHCUDA_ADV_CACHE keeps the build cache in a folder of your choice (a
second run then builds nothing). The two tests that need particular candidates skip when a subset
leaves them out.

`strict=` alternatives (any one must hold): `static` (caught by the static check alone),
`wrong_output` / `runtime_error` (the strict run's status), `error:<id>` / `warning:<id>` (a
dynamic finding of that severity), `pass` (honest: passed, no error finding anywhere).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch
from support.candidates import candidate_source, expectation

from tools.checks import static_findings, verdict
from tools.evaluate import evaluate
from tools.protocol import EvalRequest

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "tests" / "candidates"
PROBLEMS = CANDIDATES / "adversarial" / "problems"
BANDWIDTH = 4.8e12  # bytes/s, the H200's HBM3e peak (a floor must be physical: peaks, not measured rates)
FP32_FLOPS = 67e12  # fp32 FMA peak
# Speed-of-light floors (ms): max(compulsory reads / bandwidth, flops / fp32 rate). Only the inputs
# count: the L2 flush evicts them, but up to an L2's worth of output may still be in flight at the end.
SOL_MS = {
    "relu": 4 * 4096 * 16384 / BANDWIDTH * 1e3,
    "matmul": max(2 * 4 * 1024 * 1024 / BANDWIDTH, 2 * 1024**3 / FP32_FLOPS) * 1e3,
    "softmax": 4 * 256 * 32768 / BANDWIDTH * 1e3,
    "linear_relu": max(4 * (512 * 1024 + 1024 * 1024) / BANDWIDTH, 2 * 512 * 1024 * 1024 / FP32_FLOPS) * 1e3,
    "rowsum": 4 * 1024 * 16384 / BANDWIDTH * 1e3,
}
PERF_TRIALS = 20
PARALLEL = int(os.environ.get("STITCHCUDA_TEST_PARALLEL", "6"))  # builds overlap; GPU work is serialised
ONLY = re.compile(os.environ.get("STITCHCUDA_ADV_ONLY", ""))


def request(path: Path, mode: str, cache_dir: Path) -> EvalRequest:
    problem = expectation(path)["problem"]
    return EvalRequest(
        action="verify",
        problem_name=problem,
        problem_source=(PROBLEMS / f"{problem}.py").read_text(),
        candidate_source=candidate_source(path),
        device="cuda",
        mode=mode,  # type: ignore[typeddict-item]
        perf_trials=PERF_TRIALS,
        sol_ms=SOL_MS[problem],
        cache_dir=str(cache_dir),
    )


def run_one(path: Path, cache_dir: Path) -> dict[str, Any]:
    strict = evaluate(request(path, "strict", cache_dir), timeout_s=600)
    kernelbench = evaluate(request(path, "kernelbench", cache_dir), timeout_s=600)
    return {"path": path, "strict": strict, "kernelbench": kernelbench}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("STITCHCUDA_ADV_CACHE")
    return Path(chosen) if chosen else tmp_path_factory.mktemp("adversarial-build-cache")


@pytest.fixture(scope="module")
def results(cache_dir: Path) -> list[dict[str, Any]]:
    paths = sorted((CANDIDATES / "honest").glob("*.py")) + sorted((CANDIDATES / "adversarial").glob("*.py"))
    paths = [p for p in paths if ONLY.search(p.stem)]
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return list(pool.map(lambda p: run_one(p, cache_dir), paths))


def judge(result: dict[str, Any]) -> tuple[bool, str]:
    """(ok, why) for one candidate against its declared expectation."""
    path: Path = result["path"]
    expect = expectation(path)
    static = static_findings(candidate_source(path))
    strict = result["strict"]
    dynamic = strict.get("findings") or []
    errors = {f["id"] for f in dynamic if f["severity"] == "error"}
    warnings = {f["id"] for f in dynamic if f["severity"] == "warning"}
    if verdict(static) != expect["static"]:
        return False, f"static verdict {verdict(static)}, expected {expect['static']}"
    if expect["strict"] == "pass":
        static_errors = {f["id"] for f in static if f["severity"] == "error"}
        ok = strict["status"] == "passed" and not errors and not static_errors
        return ok, "" if ok else f"{strict['status']}: {strict.get('message', '')[:160]} {sorted(errors)}"
    for alternative in expect["strict"].split("|"):
        kind, _, name = alternative.partition(":")
        if kind == "static" and verdict(static) != "clean":
            return True, "caught statically"
        if kind in ("wrong_output", "runtime_error") and strict["status"] == kind:
            return True, kind
        if kind == "error" and name in errors:
            return True, f"error finding {name}"
        if kind == "warning" and name in warnings:
            return True, f"warning finding {name}"
    return False, f"none of {expect['strict']}: {strict['status']} {sorted(errors | warnings)}"


def table(results: list[dict[str, Any]]) -> str:
    head = f"{'candidate':<28} {'kind':<11} {'static':<10} {'strict':<13} {'cov':>5} {'strict ms':>9} {'kb':<13} {'kb ms':>8}  ok  findings / why"
    lines = [head, "-" * len(head)]
    for result in results:
        path: Path = result["path"]
        strict, kb = result["strict"], result["kernelbench"]
        ok, why = judge(result)
        coverage = strict.get("operator_coverage")
        dynamic = sorted({f["id"] for f in strict.get("findings") or [] if f["severity"] != "info"})
        lines.append(
            f"{path.stem[:28]:<28} {path.parent.name:<11} {verdict(static_findings(candidate_source(path))):<10} "
            f"{strict['status']:<13} {'' if coverage is None else f'{coverage:.2f}':>5} "
            f"{strict.get('timing', {}).get('candidate_ms', float('nan')):>9.4g} {kb['status']:<13} "
            f"{kb.get('timing', {}).get('candidate_ms', float('nan')):>8.4g}  {'yes' if ok else 'NO '} "
            f"{','.join(dynamic)} / {why}"
        )
    return "\n".join(lines)


def test_every_cheat_is_caught_and_every_honest_program_passes(results: list[dict[str, Any]]) -> None:
    print("\n" + table(results))
    fooled = [
        r["path"].stem
        for r in results
        if r["path"].parent.name == "adversarial" and r["kernelbench"]["status"] == "passed"
    ]
    print(f"\nKernelBench's own rules passed {len(fooled)} cheats: {', '.join(fooled)}")
    failures = [f"{r['path'].stem}: {judge(r)[1]}" for r in results if not judge(r)[0]]
    assert not failures, "\n".join(failures)


def test_operator_coverage_separates_own_kernels_from_fallbacks(results: list[dict[str, Any]]) -> None:
    coverage = {r["path"].stem: r["strict"].get("operator_coverage") for r in results}
    needed = {
        "relu_vectorized",
        "matmul_tiled",
        "linear_relu_fused",
        "torch_matmul_forward",
        "linear_relu_partial",
    }
    if not needed <= set(coverage):
        pytest.skip("the selected subset lacks the candidates this test compares")
    assert coverage["relu_vectorized"] is not None and coverage["relu_vectorized"] >= 0.9
    assert coverage["matmul_tiled"] >= 0.9 and coverage["linear_relu_fused"] >= 0.9
    assert coverage["torch_matmul_forward"] is not None and coverage["torch_matmul_forward"] <= 0.1
    assert coverage["linear_relu_partial"] < 0.6  # the GEMM, most of the time, stayed in PyTorch


def test_honest_programs_time_in_the_same_range_in_both_modes(results: list[dict[str, Any]]) -> None:
    for r in results:
        if r["path"].parent.name != "honest" or r["strict"]["status"] != "passed":
            continue
        strict_ms = r["strict"]["timing"]["candidate_ms"]
        kb_ms = r["kernelbench"]["timing"]["candidate_ms"]
        # Strict mode's per-call work (device-wide sync, input rotation) costs tens of microseconds:
        # tiny programs are compared on that absolute gap, the rest on the ratio.
        if kb_ms >= 0.1:
            assert 0.5 < strict_ms / kb_ms < 2.0, (r["path"].stem, strict_ms, kb_ms)
        else:
            assert abs(strict_ms - kb_ms) < 0.06, (r["path"].stem, strict_ms, kb_ms)
        assert not r["strict"]["timing"]["candidate"]["off_stream"], r["path"].stem


def test_check_cli_end_to_end(results: list[dict[str, Any]], cache_dir: Path, tmp_path: Path) -> None:
    if not ONLY.search("relu_vectorized"):
        pytest.skip("the selected subset leaves the CLI run out")
    env = {**os.environ, "STITCHCUDA_CACHE": str(cache_dir)}
    problem = str(PROBLEMS / "relu.py")
    runs = {}
    for name in ("honest/relu_vectorized.py", "adversarial/noop_kernel.py"):
        program = tmp_path / Path(name).name  # the whole program, shared base spliced in
        program.write_text(candidate_source(CANDIDATES / name))
        done = subprocess.run(
            [sys.executable, "-m", "graph.cli", "check", str(program), "--problem", problem],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        runs[name] = (done.returncode, json.loads(done.stdout))
        print(
            f"\n{name}: exit {done.returncode}, verdict {runs[name][1]['verdict']}, "
            f"coverage {runs[name][1]['operator_coverage']}"
        )
    assert runs["honest/relu_vectorized.py"][0] == 0
    assert runs["honest/relu_vectorized.py"][1]["operator_coverage"] >= 0.9
    assert runs["adversarial/noop_kernel.py"][0] == 1
    assert runs["adversarial/noop_kernel.py"][1]["verdict"] == "hacked"
