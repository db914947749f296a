"""On a GPU: the offline policy's scan programs against float64 PyTorch, and their speed.

Cases: one program holding every scan variant at odd sizes (rows shorter than a warp's chunk, rows
that are not a multiple of 4, multi-tile rows with look-back, one row of 2^24 elements, a middle and
a first dim, cumprod, reverse, bool masks, an exclusive epilogue, a prologue whose result is also
stored; a second program), the same programs as a CUDA graph (the look-back scratch is allocated stream-ordered inside
the capture) and at demotion level 1, and every scan problem of evals/suite at full size. Each
case checks allclose(atol=rtol=1e-4) against the fp32 reference, the normalised error against a
float64 reference within max(1e-5, 16 x the fp32 reference's own), and two calls agreeing; suite
problems are then timed against eager (CUDA events, median of 3 x 10 calls) with the bandwidth
reached.

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_scan_gpu.py --write out/scan-gpu
and run there (out/scan-gpu carried) with
  bash evals/device/scan_gpu.sh      (= STITCH_SCAN_PROGRAMS=out/scan-gpu pytest -q -s this file)
Knobs: STITCH_SCAN_ONLY=substring of labels, STITCH_SCAN_JOBS=parallel builds (default 8),
STITCH_SCAN_RESULTS=file (the table's rows as JSON lines).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # codegen and support/ when run as a script (--write)
from support.family_gpu import check_case, run_family, write_family_programs, write_main  # noqa: E402

SUITE = REPO / "evals" / "suite"

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

VARIANTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, odd, wide, huge, short, near1, bmask, smask, small, cube, tall):
        return (
            torch.cumsum(odd, dim=1),
            torch.cumsum(wide, 1),
            torch.cumsum(huge, -1),
            torch.cumsum(short, 1),
            torch.cumprod(near1, 1),
            torch.cumsum(odd.flip(1), 1).flip(1),
            torch.cumprod(near1.flip(1), 1).flip(1),
            torch.cumsum(short.flip(1), 1).flip(1) * 2.0,
            torch.cumsum(odd * bmask, dim=1),
            torch.cumsum(small * smask, dim=1) - small,
            torch.cumsum(odd, dim=1) - odd,
            cube.cumsum(1),
            torch.cumsum(cube.flip(0), 0).flip(0),
            torch.cumprod(tall * 0.02 + 0.99, 0),
        )


def get_inputs():
    odd = torch.rand(3, 100003)
    return [
        odd,
        torch.rand(5, 65536),
        torch.rand(1, 16777216),
        torch.rand(1000, 37),
        torch.rand(64, 5000) * 0.02 + 0.99,
        torch.rand(3, 100003) > 0.5,
        torch.rand(4096, 64) > 0.3,
        torch.rand(4096, 64),
        torch.rand(4, 3000, 33),
        torch.rand(5000, 17),
    ]


def get_init_inputs():
    return []
"""
# Fused prologues need the chain right before the scan (one input: nothing is scheduled in between).
PROLOGUES = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        t = torch.tanh(x * 1.5)
        a = torch.cumsum(t, dim=1) + t
        b = torch.cumprod(x * 0.02 + 0.99, 0)
        c = torch.cumsum(torch.exp(x).flip(1), 1).flip(1)
        return a, b, c


def get_inputs():
    return [torch.rand(4100, 68)]


def get_init_inputs():
    return []
"""
SCAN_NAMES = ("Cumsum", "Cumprod")


def suite_problems() -> list[Path]:
    return [p for p in sorted(SUITE.glob("level[12]/*.py")) if any(n in p.stem for n in SCAN_NAMES)]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "variants.py").write_text(VARIANTS)
    (folder / "prologues.py").write_text(PROLOGUES)
    problems = [("variants", folder / "variants.py", False), ("prologues", folder / "prologues.py", False)]
    activations = REPO / "tests" / "fixtures" / "problems" / "level1" / "40_Activations.py"
    problems += [("activations", activations, False)]  # the added elementwise activations' numerics
    problems += [(p.stem, p, True) for p in suite_problems()]
    return write_family_programs(folder, problems, arch)


def test_scan_programs_match_float64_and_time_against_eager() -> None:
    run_family("SCAN", write_programs, check_case)


if __name__ == "__main__":
    write_main(__doc__, write_programs)
