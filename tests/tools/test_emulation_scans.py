"""Scans in the CPU emulation: rows of one tile run without ticket or look-back, longer rows with them
(templates/scan.cuh)."""

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
