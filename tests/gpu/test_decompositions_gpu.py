"""On a GPU: the calls the tracer writes out (norms, distances, losses, einsum, unfold), reshapes that
copy through our gather, and a forward that keeps state in an attribute, against float64 PyTorch,
and their speed.

Cases: tests/fixtures/problems/level2/33_Decomposed_Ops.py (every written-out call at odd sizes) and
level3/7_Stateful_Cell.py (attribute writes, an in-place copy into the attribute, defaulted
parameters) and level3/8_SSD_Chunked_Scan.py (einops, a triangle-masked segment sum, four-operand
einsums), as planned, as a CUDA graph and at demotion level 1; then the suite problems that use
them (level1/51-56, level3/22_VanillaRNNState, level3/23_Mamba2SSD) at full size, timed against eager. The checks and the
table are the shared harness's (tests/support/family_gpu.py: check_case, print_table): allclose 1e-4
against fp32, the error against float64 within max(1e-5, 16 x the fp32 reference's own), two calls
agreeing.

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_decompositions_gpu.py --write out/decomposed-gpu
and run there (out/decomposed-gpu carried) with
  STITCH_DECOMPOSED_PROGRAMS=out/decomposed-gpu python -m pytest -q -s tests/gpu/test_decompositions_gpu.py
Knobs: STITCH_DECOMPOSED_ONLY=substring of labels, STITCH_DECOMPOSED_RESULTS=file (rows as JSON lines).
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

FIXTURES = REPO / "tests" / "fixtures" / "problems"
SUITE = REPO / "evals" / "suite"
SUITE_NAMES = (
    "level1/51_FrobeniusNormalize",
    "level1/52_SmoothL1Loss",
    "level1/53_TripletMarginLoss",
    "level1/54_KLDivLoss",
    "level1/55_Einsum_AttentionScores",
    "level1/56_CrossEntropyLoss",
    "level3/22_VanillaRNNState",
    "level3/23_Mamba2SSD",
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    problems = [
        ("decomposed", FIXTURES / "level2" / "33_Decomposed_Ops.py", False),
        ("stateful", FIXTURES / "level3" / "7_Stateful_Cell.py", False),
        ("ssd", FIXTURES / "level3" / "8_SSD_Chunked_Scan.py", False),
    ]
    problems += [(name.split("/")[1], SUITE / f"{name}.py", True) for name in SUITE_NAMES]
    return write_family_programs(folder, problems, arch)


def test_written_out_programs_match_float64_and_time_against_eager() -> None:
    run_family("DECOMPOSED", write_programs, check_case)


if __name__ == "__main__":
    write_main(__doc__, write_programs)
