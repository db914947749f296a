"""Batched matmuls whose batch dims no single stride walks (codegen/emit/runtime.py's _stitch_mm):
they run as several strided-batched cuBLASLt calls (templates/gemm.cuh's stitch_gemm_nested) on the
operands where they are, where PyTorch's `contiguous()` copied them before."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support.emulated_programs import emulated_outputs, program_source

from codegen.emit.runtime import _stitch_batch_split, _stitch_mat, _stitch_span_stride


def heads(t: torch.Tensor, h: int) -> torch.Tensor:
    """(B, S, H * D) -> (B, H, S, D), a view: the (b, h) strides are S * H * D and D."""
    b, s, e = t.shape
    return t.view(b, s, h, e // h).transpose(1, 2)


def test_head_split_views_are_cut_between_batch_and_heads_and_never_copied() -> None:
    q, k = heads(torch.rand(2, 5, 12), 3), heads(torch.rand(2, 5, 12), 3)
    kt = k.transpose(-2, -1)
    assert _stitch_span_stride(q, 0, 2) is None  # no single stride walks (b, h)
    assert _stitch_batch_split((q, kt), 2) == 1
    for t in (q, kt):
        mat, transposed, ld, inner, outer = _stitch_mat(t, 1)
        assert mat.data_ptr() == t.data_ptr() and mat.stride() == t.stride()  # the view itself
        assert (inner, outer, ld) == (4, 60, 12)
        assert transposed == (1 if t is kt else 0)


def test_contiguous_and_broadcast_batches() -> None:
    a = torch.rand(2, 3, 4, 5)
    assert _stitch_batch_split((a, a.transpose(-2, -1)), 2) == 0  # one stride: one call
    assert _stitch_mat(a, 0)[3:] == (20, 0)
    w = torch.rand(3, 5, 4).expand(2, 3, 5, 4)  # a batch dim broadcast with stride 0
    assert _stitch_batch_split((a, w), 2) == 1
    mat, _, _, inner, outer = _stitch_mat(w, 1)
    assert mat.data_ptr() == w.data_ptr() and (inner, outer) == (20, 0)
    odd = torch.rand(4, 2, 3, 6)[:, :, :, :5].permute(1, 0, 2, 3)  # (2, 4) batch, strides 18 and 36
    assert _stitch_batch_split((odd, odd.transpose(-2, -1)), 2) == 1
    three = torch.rand(2, 3, 4, 6, 5).permute(0, 2, 1, 3, 4)  # no cut of these three dims fits: copied
    assert _stitch_batch_split((three,), 3) == 0
    assert _stitch_mat(three, 0)[0].is_contiguous()


NESTED_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)

    def forward(self, x, w):
        b, s, e = x.shape
        q = self.q(x).view(b, s, 4, 4).transpose(1, 2)
        k = self.k(x).view(b, s, 4, 4).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1))
        shared = torch.matmul(q, w.expand(b, 4, 4, 6))
        return scores, shared


def get_inputs():
    return [torch.rand(3, 7, 16) - 0.5, torch.rand(1, 4, 4, 6)]


def get_init_inputs():
    return []
"""


@pytest.fixture(autouse=True)
def _no_algorithm_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STITCHCUDA_CUDNN_CACHE", "off")


def test_nested_batches_compute_the_reference_in_the_emulation(tmp_path: Path) -> None:
    problem = tmp_path / "nested.py"
    problem.write_text(NESTED_PROBLEM)
    source = program_source(problem)
    assert "_ext.gemm_nested(" in source
    expected, got = emulated_outputs(problem, source)
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert g.shape == e.shape and torch.allclose(g, e, atol=1e-5, rtol=1e-5), f"output {i}"
