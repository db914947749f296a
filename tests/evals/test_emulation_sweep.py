"""The emulated sweep: sizes shrunk without touching anything else, and a real run over a small suite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evals.emulation_sweep import main, shrink_sizes

REPO = Path(__file__).resolve().parents[2]


def test_shrink_sizes_makes_batches_and_large_sizes_small_and_leaves_the_rest() -> None:
    source = (
        "import torch\n"
        "batch_size = 128\n"
        "N = 2048 * 2\n"
        "dim = 24\n"
        "depth = 64; height = width = 64\n"
        "eps = 1e-5\n"
        "shape = (4, 4)\n"
        "class Model:\n"
        "    size = 4096\n"
    )
    out = shrink_sizes(source)
    assert "batch_size = 2\n" in out
    assert "N = 256\n" in out  # 4096 // 16
    assert "dim = 24\n" in out and "eps = 1e-5\n" in out and "shape = (4, 4)\n" in out
    assert "    size = 4096\n" in out  # only module-level names
    assert "depth = 16; height = width = 64\n" in out  # the line's other statement kept


@pytest.mark.slow
def test_the_sweep_checks_each_program_against_its_shrunk_reference(tmp_path: Path) -> None:
    root = tmp_path / "suite"
    (root / "level1").mkdir(parents=True)
    for name in ("1_ReLU.py", "5_LayerNorm.py"):
        shutil.copy(REPO / "tests" / "fixtures" / "problems" / "level1" / name, root / "level1" / name)
    # a problem whose shrunk sizes no longer agree: skipped, not failed
    (root / "level1" / "7_Mismatch.py").write_text(
        "import torch\nimport torch.nn as nn\nrows = 64\ncols = 64\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x.view(64, 64) * 2\n\n"
        "def get_inputs():\n    return [torch.rand(rows, cols)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    out = tmp_path / "sweep.jsonl"
    assert main([str(root), "--levels", "level1", "--out", str(out)]) == 0
    records = {r["problem"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert records["level1/1_ReLU"]["status"] == "ok"
    assert records["level1/5_LayerNorm"]["status"] == "ok"
    assert records["level1/5_LayerNorm"]["max_abs_err"] < 1e-4
    assert records["level1/7_Mismatch"]["status"] == "skipped"
    lines = out.read_text().splitlines()
    assert main([str(root), "--levels", "level1", "--out", str(out)]) == 0  # resumes: nothing re-run
    assert out.read_text().splitlines() == lines
