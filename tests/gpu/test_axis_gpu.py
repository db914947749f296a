"""On a GPU: the AXIS family (argmax / argmin, max / min with indices, logsumexp, softmax over a
non-last dim) and prod / reductions over a first or middle dim, against PyTorch and float64.

Cases: one program per kernel path at odd sizes (warp rows, block rows, rows split over several
blocks, the flattened tensor, columns, columns split over R, full and first-dim reductions split
over blocks, ties from integer-valued inputs, NaN
and -inf from a log prologue, values with an epilogue next to the indices, a prologue result that is
also stored), the same programs as a CUDA graph and at demotion level 1, and the suite's problems
that use these ops at full size (timed against eager, CUDA events, median of 3 x 10 calls).
Float outputs must match the fp32 reference (allclose 1e-4, NaN equal) and stay within
max(1e-5, 16 x the fp32 reference's own) normalised error against float64; int64 indices must equal
PyTorch's exactly (the prologues here are exact in fp32, so there are no near-ties to round apart).

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_axis_gpu.py --write out/axis-gpu
and run there (out/axis-gpu carried) with
  STITCH_AXIS_PROGRAMS=out/axis-gpu python -m pytest -q -s tests/gpu/test_axis_gpu.py
Knobs: STITCH_AXIS_ONLY=substring of labels, STITCH_AXIS_JOBS=parallel builds (default 8),
STITCH_AXIS_RESULTS=file (the table's rows as JSON lines).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # codegen and support/ when run as a script (--write)
from support.family_gpu import (  # noqa: E402
    load_case,
    outputs,
    relative_error,
    run_family,
    timing_fields,
    write_family_programs,
    write_main,
)

SUITE = REPO / "evals" / "suite"

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ARG_VARIANTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, short, long, few, cube, tall, ints, flat):
        v, i = torch.max(cube, dim=1)
        w, j = torch.min(short, 1, keepdim=True)
        return (
            torch.argmax(short, dim=1),
            short.argmin(dim=-1, keepdim=True),
            torch.argmax(long, 1),
            torch.argmin(few, 1),
            torch.argmax(cube, dim=1),
            torch.argmin(cube, dim=0, keepdim=True),
            torch.argmax(tall, dim=0),
            torch.argmax(ints, dim=1),
            torch.argmin(ints, dim=0),
            torch.argmax(ints),
            torch.argmax(flat * 2.0 - 1.0),
            torch.argmax(torch.log(short - 0.3), dim=1),
            torch.argmin(torch.log(torch.relu(short - 0.5)), dim=1),
            torch.argmax(torch.log(cube - 0.2), dim=1),
            v * 2.0 + 1.0,
            i,
            w,
            j,
            torch.max(tall, 0)[1],
        )


def get_inputs():
    return [
        torch.rand(1000, 37),
        torch.rand(300, 20001),
        torch.rand(3, 1000000),
        torch.rand(6, 333, 70),
        torch.rand(65536, 40),
        torch.randint(0, 5, (512, 300)).float(),
        torch.rand(5000001),
    ]


def get_init_inputs():
    return []
"""
LSE_VARIANTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, short, long, few, cube, tall):
        t = torch.tanh(short * 3.0)
        return (
            torch.logsumexp(short * 20.0, dim=1),
            torch.logsumexp(long, 1, keepdim=True),
            torch.logsumexp(few * 50.0, dim=-1),
            torch.logsumexp(cube, dim=1),
            torch.logsumexp(cube, dim=(1, 2)),
            torch.logsumexp(tall, dim=0) - 1.0,
            torch.logsumexp(torch.log(torch.relu(short - 0.9)), dim=1),
            torch.logsumexp(t, dim=1) + t.sum(),
        )


def get_inputs():
    return [
        torch.rand(1000, 37),
        torch.rand(300, 20001),
        torch.rand(3, 1000000),
        torch.rand(6, 333, 70),
        torch.rand(65536, 40),
    ]


def get_init_inputs():
    return []
"""
SOFTMAX_VARIANTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=1)

    def forward(self, img, cube, tall, near1):
        return (
            self.softmax(img),
            torch.log_softmax(img * 4.0, dim=1),
            torch.softmax(cube, dim=1) * 2.0 - 1.0,
            torch.softmax(tall * 8.0, dim=0),
            torch.log_softmax(tall, 0),
            torch.softmax(torch.log(cube - 0.01), dim=0),
            torch.prod(near1, dim=1),
            torch.prod(near1, 0, keepdim=True),
            torch.sum(tall, dim=0),
            torch.amax(cube, dim=(0, 1)),
            torch.mean(img, dim=1),
            tall.sum(),
            torch.mean(near1 - 1.0),
            torch.prod(near1.reshape(-1)[:4000] * 0.5 + 0.5),
        )


def get_inputs():
    return [
        torch.rand(8, 19, 33, 35),
        torch.rand(6, 333, 70),
        torch.rand(20000, 24),
        torch.rand(16, 300, 130) * 0.02 + 0.99,
    ]


def get_init_inputs():
    return []
"""
CASES = {"arg": ARG_VARIANTS, "lse": LSE_VARIANTS, "softmax": SOFTMAX_VARIANTS}
SUITE_NAMES = ("Argmax", "Argmin", "LogSumExp", "Softmax_Channels", "Prod")


def suite_problems() -> list[Path]:
    return [p for p in sorted(SUITE.glob("level[12]/*.py")) if any(n in p.stem for n in SUITE_NAMES)]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    folder.mkdir(parents=True, exist_ok=True)
    problems: list[tuple[str, Path, bool]] = []
    for label, source in CASES.items():
        (folder / f"{label}.py").write_text(source)
        problems.append((label, folder / f"{label}.py", False))
    problems += [(p.stem, p, True) for p in suite_problems()]
    return write_family_programs(folder, problems, arch)


def _compare(i: int, o: torch.Tensor, a: torch.Tensor, r: torch.Tensor, r64: torch.Tensor) -> str:
    """'' when output `i` is right, else what is wrong with it."""
    if o.shape != r.shape or o.dtype != r.dtype:
        return f"output {i}: {tuple(o.shape)} {o.dtype} != {tuple(r.shape)} {r.dtype}"
    if not o.is_floating_point():
        if not torch.equal(o, r) or not torch.equal(o, a):
            wrong = int((o != r).sum())
            return f"output {i}: {wrong} of {o.numel()} indices differ from PyTorch's"
        return ""
    if not torch.allclose(o, r, atol=1e-4, rtol=1e-4, equal_nan=True):
        return f"output {i}: max abs err {float((o - r).abs().nan_to_num(0.0).max()):.3g}"
    if not torch.allclose(o, a, atol=1e-5, rtol=1e-5, equal_nan=True):
        return f"output {i}: two calls differ"
    if not torch.equal(torch.isnan(o), torch.isnan(r)) or not torch.equal(torch.isinf(o), torch.isinf(r)):
        return f"output {i}: NaN / inf positions differ"
    ours, theirs = relative_error(o, r64), relative_error(r, r64)
    if ours > max(1e-5, 16 * theirs):
        return f"output {i}: imprecise, {ours:.3g} vs {theirs:.3g}"
    return ""


def run_case(entry: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Correctness (and for suite problems, speed) of one program; the program builds at import."""
    result: dict[str, Any] = {"label": entry["label"], "status": "passed", "message": ""}
    ref, new, ref64, inputs = load_case(entry, folder)
    rows = outputs(ref, new, ref64, inputs)
    for i, (o, a, r, r64) in enumerate(rows):
        message = _compare(i, o, a, r, r64)
        if message:
            return {**result, "status": "wrong_output", "message": message}
    del rows, ref64
    if entry["timed"]:
        result.update(timing_fields(ref, new, inputs))
    return result


def test_axis_programs_match_pytorch_and_float64() -> None:
    run_family("AXIS", write_programs, run_case)


if __name__ == "__main__":
    write_main(__doc__, write_programs)
