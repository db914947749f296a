"""On a GPU: the cuBLASLt GEMM programs against float64 PyTorch, and their speed; run once as is (the timed
search, the default) and once with STITCHCUDA_GEMM_SEARCH=0 (the heuristic's first algorithm) to compare.

Cases: tests/fixtures/problems/level1/12_Gemm_Variants.py (fused bias + ReLU epilogue, no bias, a
transposed operand, a batched product, addmm with a row-vector bias, scaled addmm and baddbmm with a
full matrix to add, unaligned inner sizes) as planned,
as a CUDA graph and at demotion level 1; then the suite's GEMM problems at full size, timed against
eager. The checks and the table are the shared harness's (tests/support/family_gpu.py: check_case,
print_table).

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_gemm_gpu.py --write out/gemm-gpu
and run there (out/gemm-gpu carried), the search off and on, with
  STITCH_GEMM_PROGRAMS=out/gemm-gpu python -m pytest -q -s tests/gpu/test_gemm_gpu.py
  STITCHCUDA_GEMM_SEARCH=0 STITCH_GEMM_PROGRAMS=out/gemm-gpu python -m pytest -q -s tests/gpu/test_gemm_gpu.py
Knobs: STITCH_GEMM_ONLY=substring of labels, STITCH_GEMM_RESULTS=file (rows as JSON lines).
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
FIXTURE = REPO / "tests" / "fixtures" / "problems" / "level1" / "12_Gemm_Variants.py"
SUITE_NAMES = (
    "level1/8_Matmul",
    "level2/1_Gemm_Bias_ReLU",
    "level2/2_Gemm_GELU_Scale",
    "level2/7_Gemm_Sigmoid_RowSum",
    "level2/8_Bmm_Softmax",
    "level3/1_MLP",
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    problems = [("gemm_variants", FIXTURE, False)]
    problems += [(name.split("/")[1], SUITE / f"{name}.py", True) for name in SUITE_NAMES]
    return write_family_programs(folder, problems, arch)


def test_gemm_programs_match_float64_and_time_against_eager() -> None:
    run_family("GEMM", write_programs, check_case)


if __name__ == "__main__":
    write_main(__doc__, write_programs)
