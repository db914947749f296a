"""The fused attention template (templates/attention.cuh) in the CPU emulation against a float64
reference: head dims 16 to 128 (each instantiation), Tq != Tk, lengths off the tile sizes, the causal
mask (with Tq < Tk, and Tq > Tk where whole rows are masked and give NaN), head-split views of a
(B, T, H * D) projection read through their strides, the output written through strides into a
(B, T, H * Dv) tensor, the scalar paths (head dims off a multiple of 4, misaligned rows), a tensor mask
compared with a number (MinGPT's lower-triangular buffer sliced and broadcast, whose fully masked key
tiles are skipped; finite fills; rows with every key masked; a float mask added and a bool one read as
bytes, SDPA's and MHA's attn_mask), and the error codes for head dims past 128
and a bad comparison. With nvcc installed, every instantiation builds for sm_90 without
spilling."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from support.attention_binding import BINDING, NOT_SUPPORTED, cuda_source, run_attention, run_attention_masked
from support.nvcc_build import NVCC

from tools.emulation.program import build_module


@pytest.fixture(scope="module")
def ext():
    return build_module(cuda_source(), BINDING)


def attention(ext, q, k, v, o, scale: float, causal: bool) -> int:
    """Our kernel on 4-d float32 views (the emulation's default stream)."""
    assert all(t.dtype == torch.float32 for t in (q, k, v, o))
    return run_attention(ext, q, k, v, o, scale, causal)


def reference(q, k, v, scale: float, causal: bool) -> torch.Tensor:
    q, k, v = q.double(), k.double(), v.double()
    scores = scale * q @ k.transpose(-2, -1)
    if causal:
        Tq, Tk = scores.shape[-2:]
        keep = torch.ones(Tq, Tk, dtype=torch.bool).tril(diagonal=Tk - Tq)
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, -1) @ v


def head_split(x: torch.Tensor, heads: int) -> torch.Tensor:
    """MinGPT's x.view(B, T, nh, hs).transpose(1, 2): a strided view, no copy."""
    B, T, C = x.shape
    return x.view(B, T, heads, C // heads).transpose(1, 2)


def check(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=1e-5, equal_nan=True)


# (B, H, Tq, Tk, D, Dv, causal)
CONTIGUOUS = {
    "d16 tq37 tk70": (2, 2, 37, 70, 16, 16, False),
    "d64 tq70 tk45": (2, 2, 70, 45, 64, 64, False),
    "d96 causal t65": (2, 2, 65, 65, 96, 96, True),
    "d128 tq40 tk70": (2, 2, 40, 70, 128, 128, False),
    "d128 causal t70": (1, 2, 70, 70, 128, 128, True),
    "d24 dv40 causal tq20 tk70": (2, 1, 20, 70, 24, 40, True),  # Tq < Tk: the diagonal moves right
    "d13 dv7 causal t33": (2, 2, 33, 33, 13, 7, True),  # off a multiple of 4: the scalar paths
    "d128 dv20 t9": (1, 3, 9, 9, 128, 20, False),
}


@pytest.mark.slow
@pytest.mark.parametrize("label", list(CONTIGUOUS))
def test_contiguous_operands_give_the_float64_reference(ext, label: str) -> None:
    B, H, Tq, Tk, D, Dv, causal = CONTIGUOUS[label]
    torch.manual_seed(list(CONTIGUOUS).index(label))
    q, k = torch.randn(B, H, Tq, D), torch.randn(B, H, Tk, D)
    v = torch.randn(B, H, Tk, Dv)
    o = torch.full((B, H, Tq, Dv), 7.0)
    scale = 1.0 / math.sqrt(D)
    assert attention(ext, q, k, v, o, scale, causal) == 0
    check(o, reference(q, k, v, scale, causal))


@pytest.mark.slow
@pytest.mark.parametrize(("D", "T", "causal"), [(64, 70, True), (32, 67, False), (128, 35, True)])
def test_head_split_views_in_and_head_merged_output_out(ext, D: int, T: int, causal: bool) -> None:
    """q, k, v are the three head-split thirds of one (B, T, 3C) projection (MinGPT's c_attn), the
    output is written through the strides of y.transpose(1, 2) for a (B, T, C) tensor, so the head
    merge is in place; the padding columns around it stay untouched."""
    B, H = 2, 2
    C = H * D
    torch.manual_seed(D + T)
    qkv = torch.randn(B, T, 3 * C)
    q, k, v = (head_split(x, H) for x in qkv.split(C, dim=2))
    merged = torch.full((B, T, C + 4), 5.0)  # 4 spare columns a row: every row starts 16-byte aligned
    o = merged[:, :, :C].view(B, T, H, D).transpose(1, 2)
    scale = 0.3
    assert attention(ext, q, k, v, o, scale, causal) == 0
    want = reference(q, k, v, scale, causal)
    check(merged[:, :, :C], want.transpose(1, 2).reshape(B, T, C))
    assert torch.all(merged[:, :, C:] == 5.0)


@pytest.mark.slow
def test_misaligned_rows_take_the_scalar_loads_and_stores(ext) -> None:
    """Every operand starts one float past a 16-byte boundary (D = Dv = 64, strides multiples of 4)."""
    B, H, Tq, Tk, D = 2, 2, 33, 41, 64
    torch.manual_seed(3)

    def shifted(*shape: int) -> torch.Tensor:
        flat = torch.randn(math.prod(shape) + 1)
        return flat[1:].view(*shape)

    q, k, v = shifted(B, H, Tq, D), shifted(B, H, Tk, D), shifted(B, H, Tk, D)
    o = shifted(B, H, Tq, D)
    assert attention(ext, q, k, v, o, 0.125, False) == 0
    check(o, reference(q, k, v, 0.125, False))


@pytest.mark.slow
def test_causal_rows_with_every_key_masked_give_nan(ext) -> None:
    """Causal with Tq > Tk: query i sees keys j <= i - (Tq - Tk), so the first Tq - Tk rows see none and
    give NaN, as PyTorch's softmax of an all -inf row; the first query tile (rows 0-63) has no key at all
    and launches no key tile."""
    B, H, Tq, Tk, D = 2, 2, 100, 30, 32
    torch.manual_seed(4)
    q, k, v = torch.randn(B, H, Tq, D), torch.randn(B, H, Tk, D), torch.randn(B, H, Tk, D)
    o = torch.zeros(B, H, Tq, D)
    assert attention(ext, q, k, v, o, 0.2, True) == 0
    want = reference(q, k, v, 0.2, True)
    assert torch.isnan(want[:, :, : Tq - Tk]).all() and not torch.isnan(want[:, :, Tq - Tk :]).any()
    check(o, want)


@pytest.mark.slow
def test_head_dims_past_128_and_no_keys_are_refused_for_a_fallback(ext) -> None:
    q = torch.randn(1, 1, 4, 160)
    v = torch.randn(1, 1, 4, 16)
    o = torch.full((1, 1, 4, 16), 3.0)
    assert attention(ext, q, q, v, o, 0.1, False) == NOT_SUPPORTED
    o2 = torch.full((1, 1, 4, 160), 3.0)
    assert attention(ext, v, v, q, o2, 0.1, False) == NOT_SUPPORTED
    no_keys = torch.randn(1, 1, 0, 16)
    assert attention(ext, v, no_keys, no_keys, o, 0.1, False) == NOT_SUPPORTED
    assert torch.all(o == 3.0) and torch.all(o2 == 3.0)


def masked_reference(q, k, v, scale: float, mask, compare: str, rhs: float, fill: float) -> torch.Tensor:
    """softmax(masked_fill(scale * q k^T, mask <compare> rhs, fill)) v in float64: the chain MinGPT writes."""
    q, k, v = q.double(), k.double(), v.double()
    scores = scale * q @ k.transpose(-2, -1)
    where = getattr(torch, compare)(mask, rhs)
    return torch.softmax(scores.masked_fill(where, fill), -1) @ v


@pytest.mark.slow
@pytest.mark.parametrize(("T", "D"), [(130, 64), (70, 96)])
def test_a_sliced_lower_triangular_buffer_masks_like_causal(ext, T: int, D: int) -> None:
    """MinGPT's `masked_fill(bias[:, :, :T, :T] == 0, -inf)`: the (1, 1, N, N) buffer sliced to T (row
    stride N, broadcast over batch and heads) gives what `causal` gives, key tiles past the diagonal
    skipped by the block's vote."""
    B, H, N = 2, 3, T + 21
    torch.manual_seed(T)
    bias = torch.tril(torch.ones(N, N)).view(1, 1, N, N)
    mask = bias[:, :, :T, :T]
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    o = torch.full((B, H, T, D), 7.0)
    scale = 1.0 / math.sqrt(D)
    assert run_attention_masked(ext, q, k, v, o, scale, mask, "eq", 0.0, float("-inf")) == 0
    want = masked_reference(q, k, v, scale, mask, "eq", 0.0, float("-inf"))
    check(o, want)
    check(o, reference(q, k, v, scale, True))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("compare", "rhs", "fill"), [("gt", 0.5, -1e4), ("le", -0.25, float("-inf")), ("ne", 1.0, 2.5)]
)
def test_a_per_head_random_mask_with_any_comparison_and_fill(
    ext, compare: str, rhs: float, fill: float
) -> None:
    """A (B, H, Tq, Tk) mask of random values, Tq != Tk off the tile sizes: finite fills take part in the
    softmax (nothing skipped); with -inf, rows whose every key is masked give NaN."""
    B, H, Tq, Tk, D = 2, 2, 67, 45, 32
    torch.manual_seed(len(compare) + int(rhs * 8))
    q, k, v = torch.randn(B, H, Tq, D), torch.randn(B, H, Tk, D), torch.randn(B, H, Tk, D)
    mask = torch.rand(B, H, Tq, Tk) * 2 - 1
    mask[0, 1, 5] = 1.0  # one row with every key equal: masked by gt 0.5 and kept by the others
    mask[1, 0, 3] = -1.0
    o = torch.zeros(B, H, Tq, D)
    assert run_attention_masked(ext, q, k, v, o, 0.3, mask, compare, rhs, fill) == 0
    check(o, masked_reference(q, k, v, 0.3, mask, compare, rhs, fill))


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(1, 1, 70, 45), (2, 1, 70, 1), (70, 45)])
def test_an_added_mask_is_sdpas_float_attn_mask(ext, shape: tuple[int, ...]) -> None:
    """A float mask added to the scaled scores (-inf entries included, broadcast over batch, heads or
    keys), as SDPA's `attn_mask` in its math form; nothing is skipped for it. (No row is masked whole:
    PyTorch's SDPA backends differ there, NaN in the math form, 0 in some fused ones.)"""
    B, H, Tq, Tk, D = 2, 2, 70, 45, 32
    torch.manual_seed(len(shape))
    q, k, v = torch.randn(B, H, Tq, D), torch.randn(B, H, Tk, D), torch.randn(B, H, Tk, D)
    bias = torch.randn(shape)
    if shape[-1] != 1:
        bias[..., 5, ::2] = float("-inf")
    o = torch.zeros(B, H, Tq, D)
    assert run_attention_masked(ext, q, k, v, o, 0.2, bias, "add", 0.0, 0.0) == 0
    scores = 0.2 * q.double() @ k.double().transpose(-2, -1) + bias.double()
    want = torch.softmax(scores, -1) @ v.double()
    torch.testing.assert_close(
        want,
        F.scaled_dot_product_attention(
            q.double(), k.double(), v.double(), attn_mask=bias.double(), scale=0.2
        ),
    )
    check(o, want)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["keep", "drop"])
def test_a_bool_mask_keeps_or_drops_its_true_keys(ext, mode: str) -> None:
    """A bool (byte) mask, (Tq, Tk) broadcast over batch and heads: SDPA's True keeps a key, MHA's True
    masks it; a causal-shaped one skips the key tiles past the diagonal."""
    B, H, T, D = 2, 2, 100, 24
    torch.manual_seed(len(mode))
    q, k, v = torch.randn(B, H, T, D), torch.randn(B, H, T, D), torch.randn(B, H, T, D)
    lower = torch.ones(T, T, dtype=torch.bool).tril()
    lower[40:60, :10] = False  # a few holes below the diagonal
    mask = lower if mode == "keep" else lower.logical_not()
    o = torch.zeros(B, H, T, D)
    assert run_attention_masked(ext, q, k, v, o, 0.3, mask, mode, 0.0, float("-inf")) == 0
    scores = (0.3 * q.double() @ k.double().transpose(-2, -1)).masked_fill(lower.logical_not(), float("-inf"))
    check(o, torch.softmax(scores, -1) @ v.double())


@pytest.mark.slow
def test_a_mask_over_whole_tiles_with_every_row_masked_gives_nan_there(ext) -> None:
    """A mask that removes every key of some query rows and whole key tiles of the rest: the empty rows
    give NaN as PyTorch does, and the first key tile, masked for everyone, is never read: NaN values
    there reach no output (PyTorch's 0 * NaN would; the reference reads zeros there instead)."""
    B, H, Tq, Tk, D = 1, 2, 80, 100, 16
    torch.manual_seed(9)
    q, k, v = torch.randn(B, H, Tq, D), torch.randn(B, H, Tk, D), torch.randn(B, H, Tk, D)
    keep = torch.zeros(1, 1, Tq, Tk)
    keep[..., 64:, 32:64] = 1.0  # the second query tile sees the second key tile only
    keep[..., 10:20, 90:] = 1.0  # rows 10-19 see the last keys; rows 0-9 and 20-63 see none
    unread = v.clone()
    unread[:, :, :32] = float("nan")  # key tile 0: masked for every query
    o = torch.zeros(B, H, Tq, D)
    assert run_attention_masked(ext, q, k, unread, o, 0.5, keep, "eq", 0.0, float("-inf")) == 0
    v[:, :, :32] = 0.0
    want = masked_reference(q, k, v, 0.5, keep, "eq", 0.0, float("-inf"))
    assert torch.isnan(want[:, :, :10]).all() and not torch.isnan(want[:, :, 64:]).any()
    check(o, want)


@pytest.mark.slow
def test_a_bad_comparison_code_is_refused(ext) -> None:
    q = torch.randn(1, 1, 4, 16)
    o = torch.full((1, 1, 4, 16), 3.0)
    mask = torch.zeros(1, 1, 4, 4)
    strides = [s for t in (q, q, q, o) for s in t.stride()[:3]]
    ptrs = [t.data_ptr() for t in (q, q, q, o)]
    code = ext.attention_masked(
        *ptrs, 1, 1, 4, 4, 16, 16, *strides, 0.1, 0, mask.data_ptr(), *mask.stride(), 10, 0.0, 0.0, 0
    )
    assert code == 1  # cudaErrorInvalidValue
    assert torch.all(o == 3.0)


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_every_instantiation_builds_for_sm90_without_spills(tmp_path: Path) -> None:
    """ptxas's report per head-dim instantiation: no spills, registers within the 3 (HD 128) or 4 blocks
    of 128 threads a SM the launch bounds ask for."""
    source = tmp_path / "attention.cu"
    source.write_text(cuda_source())
    done = subprocess.run(
        [str(NVCC), "-arch=sm_90", "-c", "-Xptxas", "-v", str(source), "-o", str(tmp_path / "attention.o")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = re.findall(
        r"Function properties for _Z23stitch_attention_kernelILi(\d+)E.*?\n\s*(\d+) bytes stack frame, "
        r"(\d+) bytes spill stores, (\d+) bytes spill loads\nptxas info\s*: Used (\d+) registers",
        done.stdout + done.stderr,
    )
    found = {int(hd): (int(stack), int(st), int(ld), int(regs)) for hd, stack, st, ld, regs in report}
    assert sorted(found) == [32, 64, 128], done.stderr[-3000:]
    for hd, (stack, stores, loads, regs) in found.items():
        assert stack == stores == loads == 0, (hd, found[hd])
        assert regs <= (168 if hd == 128 else 128), (hd, regs)
