"""On a GPU: the copy family's programs (cat / stack / contiguous / clone / tril / triu / fills) and
the masked-fill and tensor-clamp elementwise ops against float64 PyTorch, and their speed.

Cases: tests/fixtures/problems/level2/31_Copy_Families.py (every variant at odd sizes: parts that are
not multiples of 4, a channel shuffle, a causal mask from a registered buffer fused into a softmax,
broadcast clamp bounds) and level2/34_BatchNorm_Of_Concat.py (batch norm over concatenations: the
statistics from the parts, the normalisation on the cat's store) as planned, as a CUDA graph and at
demotion level 1; then every copy problem
of evals/suite at full size, timed against eager. The checks and the table are the shared harness's
(tests/support/family_gpu.py: check_case, print_table).

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_copy_gpu.py --write out/copy-gpu
and run there (out/copy-gpu carried) with
  STITCH_COPY_PROGRAMS=out/copy-gpu python -m pytest -q -s tests/gpu/test_copy_gpu.py
Knobs: STITCH_COPY_ONLY=substring of labels, STITCH_COPY_RESULTS=file (rows as JSON lines).
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
FAMILIES = REPO / "tests" / "fixtures" / "problems" / "level2" / "31_Copy_Families.py"
BN_OF_CONCAT = REPO / "tests" / "fixtures" / "problems" / "level2" / "34_BatchNorm_Of_Concat.py"
COPY_NAMES = ("Concat", "Tril", "Shuffle", "CausalMask", "DenseBlock", "Inception", "MiniGPT", "Roll_Pad")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def suite_problems() -> list[Path]:
    return [p for p in sorted(SUITE.glob("level[123]/*.py")) if any(n in p.stem for n in COPY_NAMES)]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    folder.mkdir(parents=True, exist_ok=True)
    problems = [("families", FAMILIES, False), ("bn_of_concat", BN_OF_CONCAT, False)]
    problems += [(p.stem, p, True) for p in suite_problems()]
    return write_family_programs(folder, problems, arch)


def test_copy_programs_match_float64_and_time_against_eager() -> None:
    run_family("COPY", write_programs, check_case)


if __name__ == "__main__":
    write_main(__doc__, write_programs)
