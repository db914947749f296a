"""evals.device.write_reports over a capture's results: the diagnosis and Feedback per profiled target."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.profiles import (
    MEASURED,
    PROFILES,
    RELU,
    TRANSPOSE,
    records,
)

from tools.profilers import ncu, nsys


def test_reports_are_written_from_a_captures_results(tmp_path: Path) -> None:
    import json

    from evals.device.write_reports import write_reports

    bad = ncu.NcuResult(
        "ok",
        target="candidate",
        device="NVIDIA H200",
        kernels=records("bad_kernels_candidate.raw.csv").kernels,
    )
    relu = ncu.NcuResult(
        "ok", target="candidate", device="NVIDIA H200", kernels=records("relu_candidate.raw.csv").kernels
    )
    texts = {p.name[5:-4]: p.read_text() for p in (PROFILES / "nsys" / "relu_both").glob("*.csv")}
    results = {
        "ceilings": MEASURED.to_dict(),
        "skipped": [],
        "entries": {
            "synthetic_bad_kernels": {
                "problem": "synthetic/bad_kernels",
                "plan": TRANSPOSE.dump(),
                "candidate": {"ncu": bad.to_dict()},
            },
            "level1_1_ReLU": {
                "problem": "level1/1_ReLU",
                "plan": RELU.dump(),
                "reference": {
                    "system": nsys.summary_from_reports(
                        texts, target="reference", iters=5, require_range=True
                    )
                },
                "candidate": {
                    "ncu": relu.to_dict(),
                    "system": nsys.summary_from_reports(
                        texts,
                        target="candidate",
                        iters=5,
                        own_kernels=["stitch_ew_vec_kernel"],
                        require_range=True,
                    ),
                },
            },
        },
    }
    written = write_reports(results, tmp_path)
    assert {p.name for p in written} == {
        "synthetic_bad_kernels.md",
        "synthetic_bad_kernels.json",
        "level1_1_ReLU.md",
        "level1_1_ReLU.json",
        "README.md",
    }
    report = (tmp_path / "synthetic_bad_kernels.md").read_text()
    assert "| `spill_scratch` | 1 | 39% |" in report and "uncoalesced global stores" in report
    assert "Sources: " in report and "[notes: " in report
    data = json.loads((tmp_path / "level1_1_ReLU.json").read_text())
    assert data["candidate"]["diagnosis"]["speed_of_light"]["pct_of_sol"] == pytest.approx(95.0, abs=0.1)
    assert data["reference"]["feedback"]["kind"] == "optimize"
    index = (tmp_path / "README.md").read_text()
    reference_ms = data["reference"]["diagnosis"]["speed_of_light"]["measured_ms"]
    ratio = f"{reference_ms / data['candidate']['diagnosis']['speed_of_light']['measured_ms']:.2f}x"
    assert (
        f"| [level1_1_ReLU](level1_1_ReLU.md) | candidate | 1.051 | {ratio} | 95.0 | 95 | 1 | memory-bound |"
        in index
    )
    assert ratio == "1.00x"  # the captured ReLU candidate matches eager (both at the DRAM roof)
    assert "| [level1_1_ReLU](level1_1_ReLU.md) | reference | 1.049 | - | " in index
