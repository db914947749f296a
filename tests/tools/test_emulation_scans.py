"""Scans in the CPU emulation: rows of one tile, and rows of several tiles walked by one block or
scanned a block a tile with look-back (templates/scan.cuh, the launch knob `walk`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support.emulated_programs import emulated_outputs, program_source


@pytest.fixture(autouse=True)
def _no_algorithm_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STITCHCUDA_CUDNN_CACHE", "off")


SCAN_ROWS_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, m, w):
        return (
            torch.cumsum(x, dim=1),
            torch.cumsum(x.flip(1), 1).flip(1),
            torch.cumprod(m * 0.01 + 0.995, dim=-1),
            torch.cumsum(w, dim=1),
        )


def get_inputs():
    return [torch.rand(3, 3000), torch.rand(2, 4096), torch.rand(2, 4100)]


def get_init_inputs():
    return []
"""


def test_scans_of_rows_of_one_tile_run_without_ticket_or_look_back(tmp_path: Path) -> None:
    """Rows of 1025-4096 elements are one tile each: block b scans row b, with no ticket, status words or
    look-back (rows of 4097 and more take them: the last output walks two tiles)."""
    problem = tmp_path / "scan_rows.py"
    problem.write_text(SCAN_ROWS_PROBLEM)
    expected, got = emulated_outputs(problem, program_source(problem))
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.allclose(g, e, atol=1e-3, rtol=1e-4), (
            f"output {i}: max abs err {float((g - e).abs().max()):.3g}"
        )


SCAN_WALK_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, m, w):
        return (
            torch.cumsum(x * m, dim=1),
            torch.cumsum(x.flip(1), 1).flip(1),
            torch.cumprod(w * 0.01 + 0.995, dim=-1),
        )


def get_inputs():
    return [torch.rand(5, 9000), torch.rand(5, 9000) > 0.5, torch.rand(6, 8195)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("walk", [0, 1, 2])
def test_scans_of_rows_of_several_tiles_walk_or_look_back_alike(tmp_path: Path, walk: int) -> None:
    """The scan's launch knob `walk`: one block walking each row's tiles in order (1; the prefix carried,
    the next tile's loads issued before this one's scan) and a block a tile with look-back (2) give the
    reference's scans, masked, reversed and of rows whose length is no multiple of four (the scalar
    path); 0 is the launcher's choice (these few rows: look-back)."""
    problem = tmp_path / "scan_walk.py"
    problem.write_text(SCAN_WALK_PROBLEM)
    source = program_source(problem)
    assert "'walk': 0" in source
    expected, got = emulated_outputs(problem, source.replace("'walk': 0", f"'walk': {walk}"))
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.allclose(g, e, atol=1e-3, rtol=1e-4), (
            f"output {i}: max abs err {float((g - e).abs().max()):.3g}"
        )
