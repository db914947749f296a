"""CUDA programs inside the sandbox on a real GPU: they build, run, pass and time as without it.

For each honest program the extension is built once inside the sandbox (`auto`), then timed
ROUNDS times with the sandbox and ROUNDS times without (`off`), alternating, in fresh workers.
The sandbox's cost on the timed forward is the difference of the medians; it must stay under 1%,
or inside the run-to-run spread of the unsandboxed runs when that spread is wider. A strict run
(dynamic checks under the PyTorch profiler) must come back clean too: no `sandbox_violation`
from the CUDA driver, CUPTI or the compiler.

    pytest tests/gpu/test_sandbox_gpu.py -s     # prints the layers and the cost table to record
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
import torch

from nodes.support.worker_client import to_test_result
from tools.evaluate import evaluate
from tools.protocol import EvalRequest
from tools.sandbox import layers_line

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

REPO = Path(__file__).resolve().parents[2]
HONEST = REPO / "tests" / "candidates" / "honest"
PROBLEMS = REPO / "tests" / "candidates" / "adversarial" / "problems"
PROGRAMS = {"softmax": "softmax_online.py", "matmul": "matmul_tiled.py"}
ROUNDS = 3
COST_LIMIT = 0.01


def request(problem: str, cache_dir: Path, mode: str = "kernelbench") -> EvalRequest:
    return EvalRequest(
        action="verify",
        problem_name=problem,
        problem_source=(PROBLEMS / f"{problem}.py").read_text(),
        candidate_source=(HONEST / PROGRAMS[problem]).read_text(),
        device="cuda",
        mode=mode,  # type: ignore[typeddict-item]
        perf_trials=100,
        cache_dir=str(cache_dir),
    )


def violations(response: dict[str, Any]) -> list[str]:
    return [f["evidence"] for f in response.get("findings") or [] if f["id"] == "sandbox_violation"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sandbox-gpu-cache")


@pytest.fixture(scope="module")
def measured(cache_dir: Path) -> dict[str, dict[str, Any]]:
    """Per problem: the sandboxed build run, then ROUNDS alternating timed runs per mode."""
    out: dict[str, dict[str, Any]] = {}
    for problem in PROGRAMS:
        built = dict(evaluate(request(problem, cache_dir), timeout_s=600, sandbox="auto"))
        runs: dict[str, list[dict[str, Any]]] = {"auto": [], "off": []}
        for _ in range(ROUNDS):
            for mode in ("off", "auto"):
                runs[mode].append(dict(evaluate(request(problem, cache_dir), timeout_s=300, sandbox=mode)))
        out[problem] = {"built": built, "runs": runs}
    return out


def test_programs_build_and_pass_inside_the_sandbox(measured: dict[str, dict[str, Any]]) -> None:
    for problem, entry in measured.items():
        built = entry["built"]
        print(
            f"\n{problem}: sandbox {layers_line(built.get('sandbox'))}; applied {built['sandbox'].get('applied')}"
        )
        assert built["status"] == "passed", (problem, built["message"])
        assert built["build"]["ok"] and not built["build"]["cached"]
        assert not violations(built), violations(built)
        layers = built["sandbox"]["layers"]
        assert layers["network"]["on"] and layers["syscalls"]["on"], layers
        for mode, runs in entry["runs"].items():
            for run in runs:
                assert run["status"] == "passed", (problem, mode, run["message"])
                assert run["build"]["cached"] and not violations(run)


def test_the_sandbox_costs_under_one_percent_of_a_timed_forward(measured: dict[str, dict[str, Any]]) -> None:
    rows = ["| program | off ms (median, min-max) | sandbox ms (median, min-max) | cost | off spread |",
            "|---|---|---|---|---|"]  # fmt: skip
    failures = []
    for problem, entry in measured.items():
        times = {m: [r["timing"]["candidate_ms"] for r in runs] for m, runs in entry["runs"].items()}
        off, box = statistics.median(times["off"]), statistics.median(times["auto"])
        cost = (box - off) / off
        spread = (max(times["off"]) - min(times["off"])) / off
        rows.append(
            f"| {problem} | {off:.4f} ({min(times['off']):.4f}-{max(times['off']):.4f}) | {box:.4f} "
            f"({min(times['auto']):.4f}-{max(times['auto']):.4f}) | {cost:+.2%} | {spread:.2%} |"
        )
        if cost >= max(COST_LIMIT, spread):
            failures.append(f"{problem}: {cost:+.2%} (limit {max(COST_LIMIT, spread):.2%})")
    print("\n" + "\n".join(rows))
    assert not failures, failures


def test_a_strict_run_is_clean_inside_the_sandbox(
    cache_dir: Path, measured: dict[str, dict[str, Any]]
) -> None:
    response = dict(evaluate(request("softmax", cache_dir, mode="strict"), timeout_s=600, sandbox="auto"))
    assert response["status"] == "passed", response["message"]
    assert not violations(response), violations(response)
    test = to_test_result(response, (HONEST / PROGRAMS["softmax"]).read_text())  # type: ignore[arg-type]
    assert test.verdict == "clean", test.findings
