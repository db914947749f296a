"""The Python runtime helpers copied into every program (codegen/emit/runtime.py), on the CPU.

`_stitch_mm` turns row-major PyTorch operands into column-major cuBLASLt calls. To check that
mapping without a GPU, the extension's `gemm_nested` entry point is replaced by an emulation that reads
the operands from memory exactly as cuBLAS's documented column-major contract says (pointer,
leading dimension, transpose flag, batch stride) and writes D the same way.
"""

from __future__ import annotations

import ctypes

import pytest
import torch

from codegen.emit import runtime as rt


def _view(ptr: int, count: int) -> torch.Tensor:
    """A float32 CPU tensor aliasing `count` floats at address `ptr`."""
    buffer = (ctypes.c_float * count).from_address(ptr)
    return torch.frombuffer(buffer, dtype=torch.float32, count=count)


def _colmajor(ptr: int, rows: int, cols: int, ld: int, batch: int, stride: int) -> torch.Tensor:
    """(batch, rows, cols) matrices stored column-major at `ptr`."""
    span = (batch - 1) * stride + (cols - 1) * ld + rows
    flat = _view(ptr, span)
    return flat.as_strided((batch, rows, cols), (stride, 1, ld))


class FakeGemmExt:
    """cuBLASLt's contract: D = act(alpha * op(A) @ op(B) + beta * C + bias), column-major."""

    def __init__(self) -> None:
        self.calls: list[dict[str, int | float]] = []

    def gemm_nested(self, a, b, c, d, *args):
        """`outer` strided-batched GEMMs, call o's operands advanced by o * (oa, ob, oc) floats; `args`:
        bias, m, n, k, lda, ldb, ldc, ta, tb, batch, sa, sb, sc, outer, oa, ob, oc, alpha, beta, act, stream."""
        *call, outer, oa, ob, oc, alpha, beta, act, _stream = args
        for o in range(outer):
            offsets = (a + 4 * o * oa, b + 4 * o * ob, c + 4 * o * oc, d + 4 * o * oc)
            self.gemm(*offsets, *call, alpha, beta, act)

    def gemm(self, a, b, c, d, bias, m, n, k, lda, ldb, ldc, ta, tb, batch, sa, sb, sc, alpha, beta, act):
        self.calls.append(
            {"m": m, "n": n, "k": k, "ta": ta, "tb": tb, "batch": batch, "lda": lda, "ldb": ldb}
        )
        op_a = (
            _colmajor(a, k, m, lda, batch, sa).transpose(1, 2) if ta else _colmajor(a, m, k, lda, batch, sa)
        )
        op_b = (
            _colmajor(b, n, k, ldb, batch, sb).transpose(1, 2) if tb else _colmajor(b, k, n, ldb, batch, sb)
        )
        result = alpha * torch.bmm(op_a.clone(), op_b.clone())
        if beta != 0.0:
            result = result + beta * _colmajor(c, m, n, ldc, batch, sc).clone()
        if bias:
            result = result + _view(bias, m).clone().view(1, m, 1)
        if act == rt._STITCH_RELU:
            result = torch.relu(result)
        _colmajor(d, m, n, ldc, batch, sc).copy_(result)


@pytest.fixture
def fake_ext(monkeypatch: pytest.MonkeyPatch) -> FakeGemmExt:
    ext = FakeGemmExt()
    monkeypatch.setattr(rt, "_ext", ext)
    monkeypatch.setattr(rt, "_stitch_stream", lambda t: 0)
    return ext


def test_linear_uses_transposed_weight_without_copy(fake_ext: FakeGemmExt) -> None:
    torch.manual_seed(0)
    x, w, b = torch.randn(5, 7), torch.randn(3, 7), torch.randn(3)
    out = rt._stitch_mm(x, w.t(), bias=b, act=rt._STITCH_RELU)
    torch.testing.assert_close(out, torch.relu(x @ w.t() + b))
    assert fake_ext.calls[0]["ta"] == 1 and fake_ext.calls[0]["tb"] == 0  # weight read in place


def test_matmul_alpha_and_residual(fake_ext: FakeGemmExt) -> None:
    torch.manual_seed(1)
    a, b, r = torch.randn(4, 6), torch.randn(6, 9), torch.randn(4, 9)
    out = rt._stitch_mm(a, b, residual=r, alpha=0.25)
    torch.testing.assert_close(out, 0.25 * (a @ b) + r)


def test_batched_matmul_with_transposed_right_operand(fake_ext: FakeGemmExt) -> None:
    torch.manual_seed(2)
    q, k = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    out = rt._stitch_mm(q, k.transpose(-2, -1))
    torch.testing.assert_close(out, q @ k.transpose(-2, -1))
    assert fake_ext.calls[0]["batch"] == 6 and fake_ext.calls[0]["ta"] == 1


def test_batched_input_times_matrix_folds_batch_into_rows(fake_ext: FakeGemmExt) -> None:
    torch.manual_seed(3)
    x, w = torch.randn(2, 3, 8), torch.randn(5, 8)
    out = rt._stitch_mm(x, w.t())
    torch.testing.assert_close(out, x @ w.t())
    assert out.shape == (2, 3, 5) and fake_ext.calls[0]["batch"] == 1 and fake_ext.calls[0]["n"] == 6


def test_strided_row_view_keeps_its_leading_dimension(fake_ext: FakeGemmExt) -> None:
    torch.manual_seed(4)
    seq, w = torch.randn(4, 6, 10), torch.randn(3, 10)
    step = seq[:, 2, :]  # rows 60 floats apart
    out = rt._stitch_mm(step, w.t())
    torch.testing.assert_close(out, step @ w.t())
    assert fake_ext.calls[0]["ldb"] == 60


def test_broadcast_operand_index_rule() -> None:
    shape = (2, 3, 4, 5)
    for operand_shape in [(3, 1, 1), (5,), (1, 4, 5), (1,), (), (2, 3, 4, 5), (3, 4, 1), (4, 1)]:
        t = torch.randn(operand_shape)
        flat, inner, count = rt._stitch_bc(t, shape)
        expanded = t.expand(shape).reshape(-1)
        index = (torch.arange(expanded.numel()) // inner) % count
        assert torch.equal(flat.reshape(-1)[index], expanded), operand_shape


def test_same_shape_check_names_both_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        rt._stitch_same_shape(torch.zeros(2, 3), (3, 2))


def test_attention_heads_run_as_one_call_per_batch_entry_without_copies(fake_ext: FakeGemmExt) -> None:
    """q @ k^T over heads split from (B, S, H * D) projections: (b, h) strides S * H * D and D."""
    torch.manual_seed(3)
    b, s, h, d = 2, 5, 3, 4
    q = torch.randn(b, s, h * d).view(b, s, h, d).transpose(1, 2)
    k = torch.randn(b, s, h * d).view(b, s, h, d).transpose(1, 2)
    out = rt._stitch_mm(q, k.transpose(-2, -1))
    torch.testing.assert_close(out, q @ k.transpose(-2, -1))
    assert [c["batch"] for c in fake_ext.calls] == [h] * b  # b calls of h heads each
