"""The verification probe: the CPU side writes the verifier's exact requests; rows and table read
the worker's response as it is shaped (the device side needs a GPU and runs on the device machine)."""

from __future__ import annotations

import json
from pathlib import Path

from evals.device import verify_probe


def test_write_produces_the_verifiers_request_for_each_problem(tmp_path: Path) -> None:
    verify_probe.main(["--write", str(tmp_path), "level1/1_ReLU"])
    request = json.loads((tmp_path / "level1__1_ReLU.request.json").read_text())
    assert request["action"] == "verify" and request["mode"] == "strict" and request["inputs_on_device"]
    assert "class ModelNew" in request["candidate_source"] and request["problem_name"] == "1_ReLU"
    assert request["work_bytes"] > 0  # the plan's compulsory bytes travel, as from the verifier


def test_rows_and_table_carry_times_mallocs_and_phases() -> None:
    response = {
        "status": "passed",
        "seconds": 23.8,
        "message": "correct on 5 trials; 1.602 ms vs eager 1.468 ms (0.92x)",
        "phases": {"checking correctness": 5.4, "timing candidate and eager side by side": 4.5},
        "timing": {
            "candidate": {
                "mean_ms": 1.602,
                "cv": 0.085,
                "cuda_mallocs": 37,
                "issue_mean_ms": 0.0912,
                "issue_median_ms": 0.0801,
            },
            "eager": {"mean_ms": 1.468, "cv": 0.018, "cuda_mallocs": 0, "issue_mean_ms": 0.0123},
            "ratios": {"eager": {"median": 0.92}},
        },
    }
    row = verify_probe.summary("level1/1_ReLU", response)
    assert row["candidate_mallocs"] == 37 and row["eager_mallocs"] == 0
    assert row["correctness_s"] == 5.4 and row["profile_s"] == 0.0 and row["ratio_median"] == 0.92
    text = verify_probe.table([row, verify_probe.summary("level1/2_GELU", {"status": "no_gpu"})])
    assert (
        "| level1/1_ReLU | passed | 1.602 (0.085) | 1.468 (0.018) | 0.920 | 37/0 | 91.2/12.3; 80.1/- | 5.4 |"
        in text
    )
    assert "| level1/2_GELU | no_gpu | - (-) | - (-) | - | -/- | -/-; -/- |" in text


def test_the_baseline_column_runs_the_baseline_step_and_reports_no_time_without_a_gpu(
    tmp_path: Path,
) -> None:
    """--baselines measures the same problem through tools.baselines; off a GPU that step answers
    no_gpu, which the probe reports as no time (never as a made-up agreement)."""
    import torch

    if torch.cuda.is_available():
        return  # the device machine measures it for real (evals/device scripts)
    verify_probe.main(["--write", str(tmp_path), "level1/1_ReLU"])
    request = json.loads((tmp_path / "level1__1_ReLU.request.json").read_text())
    assert verify_probe.baseline_eager(request, "level1/1_ReLU") is None
