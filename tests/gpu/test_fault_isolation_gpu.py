"""Fault isolation on a GPU: each fault classified within its limit, the next candidate unaffected.

Every fault candidate (tests/candidates/adversarial/faults/, `# harness-fault: status=... limit=...`)
runs in its own worker process under its limit; right after it the honest ReLU runs in a fresh
worker and must pass. Extensions are built first (untimed), so a limit measures the fault, except
for the compiler hang, whose fault is the build.

    pytest tests/gpu/test_fault_isolation_gpu.py -s     # prints the table
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from tools.evaluate import evaluate
from tools.protocol import EvalRequest

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

REPO = Path(__file__).resolve().parents[2]
FAULTS = REPO / "tests" / "candidates" / "adversarial" / "faults"
PROBLEM = (REPO / "tests" / "candidates" / "adversarial" / "problems" / "relu.py").read_text()
HEALTHY = (REPO / "tests" / "candidates" / "honest" / "relu_vectorized.py").read_text()
ORDER = (
    "segfault",
    "illegal_address",
    "spin_kernel",
    "oom_device",
    "print_flood",
    "spin_python",
    "compiler_hang",
)
MARGIN_S = 15.0  # the parent's kill, process teardown and a fresh CUDA context


def fault(name: str) -> tuple[str, str, float]:
    source = (FAULTS / f"{name}.py").read_text()
    match = re.search(r"^# harness-fault: status=(\w+) limit=(\d+)$", source, re.M)
    assert match, name
    return source, match.group(1), float(match.group(2))


def relu_request(source: str, cache_dir: Path, **overrides: Any) -> EvalRequest:
    request = EvalRequest(
        action="verify",
        problem_name="relu",
        problem_source=PROBLEM,
        candidate_source=source,
        device="cuda",
        mode="strict",
        perf_trials=10,
        dynamic_checks=False,  # the profiler is not what this test is about
        cache_dir=str(cache_dir),
    )
    request.update(overrides)  # type: ignore[typeddict-item]
    return request


def test_faults_are_isolated(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for name in ("illegal_address", "spin_kernel"):  # prebuild, so their limits time the fault itself
        built = evaluate(relu_request(fault(name)[0], cache, action="build"), timeout_s=600)
        assert built["status"] == "passed", built["message"]
    rows = []
    failures = []
    for name in ORDER:
        source, expected, limit = fault(name)
        started = time.monotonic()
        response = evaluate(relu_request(source, cache), timeout_s=limit)
        seconds = time.monotonic() - started
        after = evaluate(relu_request(HEALTHY, cache), timeout_s=600)
        first_line = (response.get("message") or "").splitlines()[0][:70] if response.get("message") else ""
        rows.append((name, expected, response["status"], seconds, limit, after["status"], first_line))
        if response["status"] != expected:
            failures.append(f"{name}: {response['status']} ({response.get('message', '')[:300]})")
        if seconds > limit + MARGIN_S:
            failures.append(f"{name}: took {seconds:.0f} s, limit {limit:.0f} s")
        if after["status"] != "passed":
            failures.append(
                f"after {name}: the healthy candidate got {after['status']}: {after.get('message')}"
            )
        if name == "print_flood" and len(response.get("stdout_tail", "")) > 4200:
            failures.append("print_flood: the returned output tail is not capped")
    print(
        f"\n{'fault':<16} {'expected':<13} {'got':<13} {'seconds':>8} {'limit':>6}  {'next run':<8}  message"
    )
    for name, expected, got, seconds, limit, after, message in rows:
        print(f"{name:<16} {expected:<13} {got:<13} {seconds:>8.1f} {limit:>6.0f}  {after:<8}  {message}")
    assert not failures, "\n".join(failures)
