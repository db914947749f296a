"""The parent side: fault isolation within time limits, the speed-of-light judgement, a missing interpreter."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from support.worker_requests import affine_request, worker_candidate

from tools.evaluate import SOL_SLACK, SOL_SLACK_MS, evaluate, speed_of_light_findings
from tools.protocol import EvalRequest, EvalResponse
from tools.roofline import KNOWN, floor_ms

REPO = Path(__file__).resolve().parents[2]
FAULTS = REPO / "tests" / "candidates" / "adversarial" / "faults"


def test_evaluate_never_raises_for_a_missing_interpreter(tmp_path: Path) -> None:
    request = affine_request(worker_candidate("torch_ok.py"), tmp_path)
    response = evaluate(request, timeout_s=30, python=os.devnull)
    assert response["status"] == "crashed"


def _timed(min_ms: float, device: str = "NVIDIA H200") -> EvalResponse:
    return EvalResponse(status="passed", device=device, timing={"candidate": {"min_ms": min_ms}})


def test_the_floor_comes_from_sol_ms_or_from_the_work_on_a_known_gpu() -> None:
    floor = floor_ms(0, 8 << 30, KNOWN["NVIDIA H200"])  # 8 GiB of compulsory traffic: ~1 ms
    from_work = EvalRequest(work_flops=0, work_bytes=8 << 30)
    assert [f["id"] for f in speed_of_light_findings(from_work, _timed(0.1 * floor))] == ["impossible_speed"]
    assert speed_of_light_findings(from_work, _timed(floor)) == []
    assert speed_of_light_findings(from_work, _timed(0.1 * floor, device="Some Future GPU")) == []
    slack = 2.0 * (1 - SOL_SLACK) - SOL_SLACK_MS  # sol_ms=2: calls down to this are still honest
    assert speed_of_light_findings(EvalRequest(sol_ms=2.0), _timed(slack)) == []
    (found,) = speed_of_light_findings(EvalRequest(sol_ms=2.0), _timed(0.5 * slack))
    assert found["evidence"].startswith(
        f"a timed call took {0.5 * slack:.4g} ms, below the speed-of-light floor of 2 ms"
    )
    assert speed_of_light_findings(EvalRequest(sol_ms=2.0), EvalResponse(status="wrong_output")) == []


# ----------------------------------------------------------------------------------------------
# Fault isolation on the CPU: each fault classified within its limit, the next run unaffected
# ----------------------------------------------------------------------------------------------

CPU_FAULTS = [
    ("segfault", (FAULTS / "segfault.py").read_text(), "crashed", 60),
    ("spin_python", (FAULTS / "spin_python.py").read_text(), "timeout", 12),
    ("print_flood", worker_candidate("noisy.py"), "passed", 120),
    ("compiler_hang", (FAULTS / "compiler_hang.py").read_text(), "timeout", 25),
]


@pytest.mark.slow
def test_faults_are_classified_within_their_limits_and_do_not_leak(tmp_path: Path) -> None:
    healthy = worker_candidate("torch_ok.py")
    rows = []
    for name, source, expected, limit in CPU_FAULTS:
        started = time.monotonic()
        response = evaluate(affine_request(source, tmp_path / name, mode="strict"), timeout_s=limit)
        seconds = time.monotonic() - started
        after = evaluate(affine_request(healthy, tmp_path / name, mode="strict"), timeout_s=120)
        rows.append((name, expected, response["status"], round(seconds, 1), limit, after["status"]))
        assert response["status"] == expected, (name, response["message"])
        assert seconds < limit + 10, (name, seconds)
        assert after["status"] == "passed", (name, after["message"])
        if name == "compiler_hang":
            assert "while building extension 'harness_compiler_hang'" in response["message"]
        if name == "print_flood":
            assert len(response["stdout_tail"]) < 4200
    print("\nfault            expected  got       seconds  limit  next run")
    for row in rows:
        print("{:<16} {:<9} {:<9} {:>7}  {:>5}  {}".format(*row))
