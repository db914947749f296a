"""On a GPU: the row kernels (softmax, log-softmax, layer norm over the last dims) at every row-length
class against float64 PyTorch, and their speed.

Cases: tests/fixtures/problems/level1/11_Long_Rows.py (rows too long for shared memory: few rows,
split over several blocks each; many rows, one block each; lengths that are not multiples of 4; a
prologue whose value is also returned; affine and plain layer norm) as planned, as a CUDA graph and at
demotion level 1; then the suite's softmax and layer-norm problems at full size (short rows, a
normalised shape of millions of elements, long log-softmax rows), timed against eager. The checks and
the table are the shared harness's (tests/support/family_gpu.py: check_case, print_table).

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_rows_gpu.py --write out/rows-gpu
and run there (out/rows-gpu carried) with
  STITCH_ROWS_PROGRAMS=out/rows-gpu python -m pytest -q -s tests/gpu/test_rows_gpu.py
Knobs: STITCH_ROWS_ONLY=substring of labels, STITCH_ROWS_RESULTS=file (rows as JSON lines).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(Path(__file__).parent)]  # run as a script (--write)
from support.family_gpu import check_case, run_family, write_family_programs, write_main  # noqa: E402

SUITE = REPO / "evals" / "suite"
FIXTURE = REPO / "tests" / "fixtures" / "problems" / "level1" / "11_Long_Rows.py"
SUITE_NAMES = (
    "level1/4_Softmax",
    "level1/5_LayerNorm",
    "level1/57_LayerNorm_WideShape",
    "level1/58_LogSoftmax_LongRows",
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    problems = [("long_rows", FIXTURE, False)]
    problems += [(name.split("/")[1], SUITE / f"{name}.py", True) for name in SUITE_NAMES]
    return write_family_programs(folder, problems, arch)


def test_row_programs_match_float64_and_time_against_eager() -> None:
    run_family("ROWS", write_programs, check_case)


if __name__ == "__main__":
    write_main(__doc__, write_programs)
