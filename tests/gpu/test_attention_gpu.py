"""On a GPU: the fused attention template (codegen/emit/templates/attention.cuh) against float64
PyTorch at model sizes, and its speed against eager fp32 attention and fp32 SDPA.

Build: common.cuh + attention.cuh (torch-free, three head-dim instantiations) and the pybind11-only
binding of tests/support/attention_binding.py (the emulation test's too), compiled by the generated
programs' own `_stitch_build` (codegen.emit.runtime: torch and the standard library only, so it
imports without pydantic) with the real nvcc for sm_90, once per session, in a fresh
TORCH_EXTENSIONS_DIR.

Numerics (TF32 off, the strict harness's setting): MinGPT-like causal self-attention read as
head-split views of a (B, T, 3C) projection with the output written through strides into (B, T, C);
ViT-like non-causal contiguous; D = 128 with Tq != Tk; D = 32 causal at T = 1000; KernelBench's
MinGPT at B = 128. Each: max abs error against float64 within max(1e-5, 8 x the fp32 eager
reference's own), allclose(atol=rtol=1e-4) to the fp32 reference, two calls bit-identical. Causal
cases also run the tensor-mask path (MinGPT's float tril buffer compared with 0, -inf fill: what
codegen/frontend/attention_chain.py routes), under the same bounds.

Timing (printed, never asserted): the MinGPT-like, ViT-like and KernelBench MinGPT cases, ours
against (i) eager fp32 (matmul, scale, masked_fill, softmax, matmul) and (ii)
F.scaled_dot_product_attention in fp32 (is_causal where causal), and for causal cases our tensor-mask
path (`ours_mask`: its fully masked key tiles skipped by the block's vote); for head-split cases both also
merge the heads (y.transpose(1, 2).contiguous()), which ours writes in place. Timed side by side in
the harness's interleaved rounds (tools.worker.rounds, KernelBench's method: L2 flush, CUDA events),
20 calls a path in 5 rounds, the mean per path.

Run from the repository root:
  python3 -m pytest -q -s tests/gpu/test_attention_gpu.py
Knobs: STITCH_ATTN_RESULTS=file (every case's row as JSON lines).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from support.attention_binding import (  # noqa: E402  (stdlib only)
    BINDING,
    cuda_source,
    run_attention,
    run_attention_masked,
)

from codegen.emit.runtime import _stitch_build, _stitch_stream  # noqa: E402  (torch + stdlib only)
from tools.worker.rounds import Contestant, time_in_rounds  # noqa: E402  (torch + stdlib only)

DEVICE = "cuda"

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def ext(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The extension, built once per session with the real nvcc for sm_90 in a fresh build folder."""
    cuda_src = cuda_source()
    digest = hashlib.sha256((cuda_src + BINDING).encode()).hexdigest()[:12]
    saved = os.environ.get("TORCH_EXTENSIONS_DIR")
    os.environ["TORCH_EXTENSIONS_DIR"] = str(tmp_path_factory.mktemp("attention-ext"))
    try:
        return _stitch_build(f"stitch_attention_gpu_{digest}", cuda_src, BINDING, "90", use_cublas=False)
    finally:
        if saved is None:
            os.environ.pop("TORCH_EXTENSIONS_DIR", None)
        else:
            os.environ["TORCH_EXTENSIONS_DIR"] = saved


@pytest.fixture(scope="module", autouse=True)
def _strict_fp32() -> Iterator[None]:
    """TF32 off for the eager references (the strict harness's setting), restored afterwards."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    assert not torch.backends.cuda.matmul.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.fixture(scope="module")
def results() -> Callable[[dict[str, Any]], None]:
    """A writer appending a row to STITCH_ATTN_RESULTS (emptied once a session) when that is set."""
    path = os.environ.get("STITCH_ATTN_RESULTS")
    if path:
        Path(path).write_text("")

    def write(row: dict[str, Any]) -> None:
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")

    return write


@dataclass(frozen=True)
class Case:
    B: int
    H: int
    Tq: int
    Tk: int
    D: int
    causal: bool
    split: bool  # q, k, v head-split views of one (B, T, 3C) projection, output into (B, T, C)

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.D)


CASES: dict[str, Case] = {
    "mingpt-like causal split b8 h8 t512 d96": Case(8, 8, 512, 512, 96, True, True),
    "vit-like b16 h12 t197 d64": Case(16, 12, 197, 197, 64, False, False),
    "d128 tq300 tk260 b2 h16": Case(2, 16, 300, 260, 128, False, False),
    "d32 causal t1000 b4 h8": Case(4, 8, 1000, 1000, 32, True, False),
    "kernelbench mingpt causal split b128 h8 t512 d96": Case(128, 8, 512, 512, 96, True, True),
}
NUMERICS = list(CASES)[:4]
TIMED = [list(CASES)[0], list(CASES)[1], list(CASES)[4]]


class Operands:
    """A case's q, k, v on the GPU (seeded), the causal mask, and fresh NaN-filled outputs."""

    def __init__(self, case: Case, seed: int) -> None:
        self.case = case
        c, dev = case, torch.device(DEVICE)
        gen = torch.Generator(device=dev).manual_seed(seed)
        if c.split:
            assert c.Tq == c.Tk
            C = c.H * c.D
            x = torch.randn(c.B, c.Tq, 3 * C, device=dev, generator=gen)  # MinGPT's c_attn(x)
            q, k, v = x.split(C, dim=2)
            self.q, self.k, self.v = (t.view(c.B, c.Tq, c.H, c.D).transpose(1, 2) for t in (q, k, v))
        else:
            self.q = torch.randn(c.B, c.H, c.Tq, c.D, device=dev, generator=gen)
            self.k = torch.randn(c.B, c.H, c.Tk, c.D, device=dev, generator=gen)
            self.v = torch.randn(c.B, c.H, c.Tk, c.D, device=dev, generator=gen)
        # True where key j of query i is masked (the kernel's rule: j > i + Tk - Tq).
        keep = torch.ones(c.Tq, c.Tk, dtype=torch.bool, device=dev).tril(diagonal=c.Tk - c.Tq)
        self.mask = ~keep if c.causal else None
        # MinGPT's buffer: a float lower triangle, masked where it equals 0 (Tq == Tk cases only).
        self.tril = keep.float().view(1, 1, c.Tq, c.Tk) if c.causal and c.Tq == c.Tk else None

    def output(self, fill: float | None = float("nan")) -> tuple[torch.Tensor, torch.Tensor]:
        """(the tensor a caller gets, its (B, H, Tq, D) view the kernel writes through): (B, T, C) for
        head-split cases, else (B, H, Tq, D); NaN-filled (an unwritten element fails allclose), or
        uninitialised with fill=None (what a program allocates)."""
        c = self.case
        shape = (c.B, c.Tq, c.H * c.D) if c.split else (c.B, c.H, c.Tq, c.D)
        out = torch.empty(shape, device=DEVICE) if fill is None else torch.full(shape, fill, device=DEVICE)
        return out, (out.view(c.B, c.Tq, c.H, c.D).transpose(1, 2) if c.split else out)


def run_ours(
    ext: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, scale: float, causal: bool
) -> None:
    err = run_attention(ext, q, k, v, o, scale, causal, _stitch_stream(q))
    if err != 0:
        raise RuntimeError(f"stitch_attention failed with CUDA error {err}")


def run_ours_masked(
    ext: Any,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    scale: float,
    tril: torch.Tensor,
) -> None:
    err = run_attention_masked(
        ext, q, k, v, o, scale, tril, "eq", 0.0, float("-inf"), stream=_stitch_stream(q)
    )
    if err != 0:
        raise RuntimeError(f"stitch_attention_masked failed with CUDA error {err}")


def eager(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, mask: torch.Tensor | None
) -> torch.Tensor:
    """MinGPT's unfused path: matmul, scale, masked_fill, softmax, matmul (the boolean mask made once,
    outside the timing, where MinGPT compares its tril buffer with 0 each call)."""
    att = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        att = att.masked_fill(mask, float("-inf"))
    return torch.softmax(att, dim=-1) @ v


def merge_heads(y: torch.Tensor) -> torch.Tensor:
    B, H, T, D = y.shape
    return y.transpose(1, 2).contiguous().view(B, T, H * D)


def check_numerics(ext: Any, label: str, ops: Operands) -> dict[str, Any]:
    c = ops.case
    q, k, v = ops.q, ops.k, ops.v
    _, o1 = ops.output()
    _, o2 = ops.output()
    run_ours(ext, q, k, v, o1, c.scale, c.causal)
    run_ours(ext, q, k, v, o2, c.scale, c.causal)
    fp32 = eager(q, k, v, c.scale, ops.mask)
    ref64 = eager(q.double(), k.double(), v.double(), c.scale, ops.mask)
    torch.cuda.synchronize()
    row: dict[str, Any] = {"label": label, **asdict(c), "device": torch.cuda.get_device_name()}
    row["err64_ours"] = float((o1.double() - ref64).abs().max())
    row["err64_eager"] = float((fp32.double() - ref64).abs().max())
    row["allclose"] = bool(torch.allclose(o1, fp32, atol=1e-4, rtol=1e-4))
    row["repeatable"] = bool(torch.equal(o1, o2))
    row["finite"] = bool(torch.isfinite(o1).all())
    if ops.tril is not None:
        _, om = ops.output()
        run_ours_masked(ext, q, k, v, om, c.scale, ops.tril)
        torch.cuda.synchronize()
        row["err64_masked"] = float((om.double() - ref64).abs().max())
        row["allclose"] = row["allclose"] and bool(torch.allclose(om, fp32, atol=1e-4, rtol=1e-4))
        row["finite"] = row["finite"] and bool(torch.isfinite(om).all())
    del fp32, ref64
    return row


def assert_numerics(row: dict[str, Any]) -> None:
    assert row["finite"] and row["allclose"] and row["repeatable"], row
    assert row["err64_ours"] <= max(1e-5, 8 * row["err64_eager"]), row
    assert row.get("err64_masked", 0.0) <= max(1e-5, 8 * row["err64_eager"]), row


@pytest.mark.parametrize("label", NUMERICS)
def test_matches_float64_like_eager_fp32(
    ext: Any, results: Callable[[dict[str, Any]], None], label: str
) -> None:
    row = check_numerics(ext, label, Operands(CASES[label], seed=NUMERICS.index(label)))
    print(
        f"\n{label:50s} err64 ours {row['err64_ours']:.2e} eager {row['err64_eager']:.2e}"
        f" allclose {row['allclose']} repeatable {row['repeatable']}"
    )
    results({"kind": "numerics", **row})
    assert_numerics(row)


def time_side_by_side(fns: dict[str, Callable[[], Any]], trials: int = 20) -> dict[str, float]:
    """Mean ms per path, in the harness's interleaved rounds with KernelBench's method (an L2 flush and
    CUDA events around each call; tools.worker.rounds, as the verifier times candidate and eager)."""
    info = time_in_rounds([Contestant(name, fn) for name, fn in fns.items()], [[]], DEVICE,
                          method="kernelbench", trials=trials, rounds=5)  # fmt: skip
    return {name: float(info[name]["mean_ms"]) for name in fns}


def time_case(ext: Any, label: str, ops: Operands) -> dict[str, Any]:
    c = ops.case
    q, k, v, mask = ops.q, ops.k, ops.v, ops.mask
    finish = merge_heads if c.split else (lambda y: y)

    def ours() -> torch.Tensor:
        out, view = ops.output(fill=None)
        run_ours(ext, q, k, v, view, c.scale, c.causal)
        return out

    def unfused() -> torch.Tensor:
        return finish(eager(q, k, v, c.scale, mask))

    def sdpa() -> torch.Tensor:
        return finish(F.scaled_dot_product_attention(q, k, v, is_causal=c.causal, scale=c.scale))

    def ours_mask() -> torch.Tensor:
        out, view = ops.output(fill=None)
        run_ours_masked(ext, q, k, v, view, c.scale, ops.tril)
        return out

    paths = {"ours": ours, "eager": unfused, "sdpa": sdpa}
    if ops.tril is not None:
        paths["ours_mask"] = ours_mask
    with torch.no_grad():
        ms = time_side_by_side(paths)
        got, want, theirs = ours(), unfused(), sdpa()
        ref64 = finish(eager(q.double(), k.double(), v.double(), c.scale, mask))
        torch.cuda.synchronize()
    row: dict[str, Any] = {"label": label, **asdict(c), "device": torch.cuda.get_device_name()}
    row.update({f"{name}_ms": value for name, value in ms.items()})
    row["eager_over_ours"] = ms["eager"] / ms["ours"]
    if "ours_mask" in ms:
        row["eager_over_ours_mask"] = ms["eager"] / ms["ours_mask"]
    row["sdpa_over_ours"] = ms["sdpa"] / ms["ours"]
    row["err64_ours"] = float((got.double() - ref64).abs().max())
    row["err64_eager"] = float((want.double() - ref64).abs().max())
    row["err64_sdpa"] = float((theirs.double() - ref64).abs().max())
    row["allclose"] = bool(torch.allclose(got, want, atol=1e-4, rtol=1e-4))
    return row


def test_time_against_eager_and_sdpa(ext: Any, results: Callable[[dict[str, Any]], None]) -> None:
    """The timed cases' table (speed printed, not asserted); the KernelBench-size case's numerics checked too."""
    rows = []
    big = TIMED[-1]
    for i, label in enumerate(TIMED):
        ops = Operands(CASES[label], seed=100 + i)
        if label == big:
            numerics = check_numerics(ext, label, ops)
            results({"kind": "numerics", **numerics})
            assert_numerics(numerics)
        row = time_case(ext, label, ops)
        results({"kind": "timing", **row})
        rows.append(row)
        del ops
        torch.cuda.empty_cache()
    print(f"\n{torch.cuda.get_device_name()}, fp32, TF32 off; mean ms of 20 calls in 5 interleaved rounds")
    print(
        f"{'case':50s} {'ours':>8s} {'mask':>8s} {'eager':>8s} {'sdpa':>8s} {'eager/ours':>10s} {'sdpa/ours':>9s}"
        f" {'err64 ours':>10s} {'eager':>9s} {'sdpa':>9s}"
    )
    for r in rows:
        print(
            f"{r['label']:50s} {r['ours_ms']:8.3f} {r.get('ours_mask_ms', float('nan')):8.3f}"
            f" {r['eager_ms']:8.3f} {r['sdpa_ms']:8.3f}"
            f" {r['eager_over_ours']:10.2f} {r['sdpa_over_ours']:9.2f}"
            f" {r['err64_ours']:10.2e} {r['err64_eager']:9.2e} {r['err64_sdpa']:9.2e}"
        )
    for r in rows:
        assert r["allclose"], r
