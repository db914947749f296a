"""The planning sweep over a KernelBench-layout folder: per-level counts, resumable records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evals import coverage_sweep

FIXTURES = Path(__file__).parents[1] / "fixtures" / "problems"
# An op no family covers (a factorisation), so the sweep must list it as left to PyTorch.
UNCOVERED_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a):
        return torch.linalg.cholesky(a)


def get_inputs():
    a = torch.rand(8, 64, 64)
    return [a @ a.transpose(-1, -2) + 64 * torch.eye(64)]


def get_init_inputs():
    return []
"""


def test_sweep_counts_levels_and_resumes(tmp_path: Path, capsys) -> None:
    root = tmp_path / "bench"
    (root / "level1").mkdir(parents=True)
    shutil.copy(FIXTURES / "level1" / "1_ReLU.py", root / "level1" / "1_ReLU.py")
    (root / "level1" / "2_Cholesky.py").write_text(UNCOVERED_PROBLEM)
    (root / "level1" / "3_Broken.py").write_text("raise RuntimeError('no problem here')\n")
    out = tmp_path / "sweep.jsonl"
    assert coverage_sweep.main([str(root), "--out", str(out), "--levels", "level1"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["problem"] for r in records] == [
        "level1/1_ReLU",
        "level1/2_Cholesky",
        "level1/3_Broken",
    ]
    assert (
        records[0]["uncovered"] == []
        and "linalg_cholesky" in records[1]["uncovered"]
        and "error" in records[2]
    )
    table = capsys.readouterr().out
    assert "| level1 | 3 | 1 | 0 | 1 |" in table
    assert records[0]["families"] == {"relu": ["elementwise"]}
    assert records[1]["families"]["linalg_cholesky"] == ["reference"]
    # a second run reads the records instead of planning again
    out.write_text("\n".join(json.dumps({**r, "seconds": -1.0}) for r in records) + "\n")
    assert coverage_sweep.main([str(root), "--out", str(out), "--levels", "level1"]) == 0
    assert len(out.read_text().splitlines()) == 3
    index = tmp_path / "ops.md"
    assert (
        coverage_sweep.main([str(root), "--out", str(out), "--levels", "level1", "--ops-table", str(index)])
        == 0
    )
    rows = index.read_text().splitlines()
    assert "| relu | elementwise: 1 | 1 | - |" in rows and "| linalg_cholesky | - | 1 | 1 |" in rows


def test_missing_folder_is_bad_input(tmp_path: Path) -> None:
    assert coverage_sweep.main([str(tmp_path / "nowhere")]) == 2
