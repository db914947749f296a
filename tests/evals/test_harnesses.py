"""The strict-vs-KernelBench table reads two results files and puts the disagreements first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.benchmarks import harnesses


def _write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "{not json\n")
    return path


def test_the_table_names_each_disagreement_and_the_exit_code_says_whether_any(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    strict = _write(
        tmp_path / "s.jsonl",
        [
            {"problem": "level1/1_ReLU", "status": "verified", "speedup_vs_eager": 0.98},
            {"problem": "level3/4_MobileNet", "status": "verified", "speedup_vs_eager": 1.4},
            {"problem": "level1/9_Only_Strict", "status": "verified"},
        ],
    )
    kb = _write(
        tmp_path / "k.jsonl",
        [
            {"problem": "level1/1_ReLU", "status": "verified", "speedup_vs_eager": 1.01},
            {
                "problem": "level3/4_MobileNet",
                "status": "failed",
                "status_reason": "wrong output: max abs diff 0.0102 > 0.01",
            },
        ],
    )
    assert harnesses.main([str(strict), str(kb)]) == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("| level")]
    assert lines[0].startswith("| level3/4_MobileNet | verified | 1.40x | failed | - | NO | wrong output")
    assert lines[1] == "| level1/1_ReLU | verified | 0.98x | verified | 1.01x | yes |  |"
    assert "2 problems in both runs: verified 2 (strict), 1 (kernelbench); verdicts differ on 1" in out
    agreeing = _write(tmp_path / "k2.jsonl", [{"problem": "level1/1_ReLU", "status": "verified"}])
    assert harnesses.main([str(strict), str(agreeing)]) == 0
