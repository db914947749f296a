"""The layout kernels (gather, window: pad and roll, triangle, concat, nll pick) run on the CPU: the
templates compiled with g++ against a few shims, each kernel's index math checked against PyTorch
(the copy family's classification and generated code: test_copy_ops.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from support.host_emulation import build_emulator

from codegen.emit.runtime import _stitch_dims

EMULATION = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
struct StitchDim3 { unsigned x = 1, y = 1, z = 1; };
static StitchDim3 blockIdx, threadIdx, gridDim, blockDim;
struct StitchNoEpi { float apply(float v, int64_t) const { return v; } };
struct float4 { float x, y, z, w; };
static float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static float4 __ldg(const float4* p) { return *p; }
static void stitch_st4_v(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
static int stitch_vector_copies = 0;  // counts the float4 path's entries
static bool stitch_aligned16(const void* p) { ++stitch_vector_copies; return ((uintptr_t)p & 15u) == 0; }
struct Plus { float apply(float v, int64_t e) const { return v + 0.001f * (float)e; } };
#define STITCH_HOST_EMULATION
#include "layout.cuh"

// The gathered-from storage: element i holds i, so each output names the element it came from.
static std::vector<float> ramp(int64_t size) {
  std::vector<float> x(size);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (float)i;
  return x;
}

template <class K> static void run(unsigned gx, unsigned gy, unsigned threads, K kernel) {
  gridDim = {gx, gy, 1};
  blockDim = {threads, 1, 1};
  for (unsigned by = 0; by < gy; ++by)
    for (unsigned bx = 0; bx < gx; ++bx)
      for (unsigned t = 0; t < threads; ++t) {
        blockIdx = {bx, by, 1};
        threadIdx = {t, 1, 1};
        kernel();
      }
}

int main(int argc, char** argv) {
  const std::string what = argv[1];
  std::vector<float> y;
  const bool vec = what.size() > 1 && what.back() == '4';  // gather4 / window4: the float4 kernels
  if (what == "gather" || what == "gather4") {  // gather MODE WIDE diag nd sizes... strides... storage
    const int mode = atoi(argv[2]), wide = atoi(argv[3]);
    const int64_t diag = atoll(argv[4]);
    StitchStrides s{};
    s.nd = atoi(argv[5]);
    int64_t n = 1;
    for (int d = 0; d < s.nd; ++d) {
      s.size[d] = atoll(argv[6 + d]);
      s.stride[d] = atoll(argv[6 + s.nd + d]);
      n *= s.size[d];
    }
    const std::vector<float> x = ramp(atoll(argv[6 + 2 * s.nd]));
    y.assign(n, -1.0f);
    auto go = [&](auto tag) {
      using I = decltype(tag);
      run(3, 1, 32, [&] {
        if (mode == 0 && vec) stitch_gather_kernel<0, I, Plus, true>(x.data(), y.data(), s, n, diag, Plus{});
        if (mode == 0 && !vec) stitch_gather_kernel<0, I, StitchNoEpi>(x.data(), y.data(), s, n, diag, StitchNoEpi{});
        if (mode == 1) stitch_gather_kernel<1, I, StitchNoEpi>(x.data(), y.data(), s, n, diag, StitchNoEpi{});
        if (mode == 2) stitch_gather_kernel<2, I, Plus>(x.data(), y.data(), s, n, diag, Plus{});
      });
    };
    if (wide) go(uint64_t{}); else go(uint32_t{});
  } else if (what == "window" || what == "window4") {  // window MODE WIDE fill nd out_sizes... in_sizes... strides... lo... shift... storage
    const int mode = atoi(argv[2]), wide = atoi(argv[3]);
    const float fill = (float)atof(argv[4]);
    StitchStrides s{};
    StitchWindow w{};
    s.nd = atoi(argv[5]);
    int64_t n = 1;
    for (int d = 0; d < s.nd; ++d) {
      s.size[d] = atoll(argv[6 + d]);
      w.in_size[d] = atoll(argv[6 + s.nd + d]);
      s.stride[d] = atoll(argv[6 + 2 * s.nd + d]);
      w.lo[d] = atoll(argv[6 + 3 * s.nd + d]);
      w.shift[d] = atoll(argv[6 + 4 * s.nd + d]);
      n *= s.size[d];
    }
    const std::vector<float> x = ramp(atoll(argv[6 + 5 * s.nd]));
    y.assign(n, -1.0f);
    auto go = [&](auto tag) {
      using I = decltype(tag);
      run(3, 1, 32, [&] {
        if (mode == 3 && !vec) stitch_window_kernel<3, I, StitchNoEpi>(x.data(), y.data(), s, w, n, fill, StitchNoEpi{});
        if (mode == 4 && !vec) stitch_window_kernel<4, I, StitchNoEpi>(x.data(), y.data(), s, w, n, fill, StitchNoEpi{});
        if (mode == 3 && vec) stitch_window_kernel<3, I, Plus, true>(x.data(), y.data(), s, w, n, fill, Plus{});
        if (mode == 4 && vec) stitch_window_kernel<4, I, Plus, true>(x.data(), y.data(), s, w, n, fill, Plus{});
        if (mode == 5) stitch_window_kernel<5, I, StitchNoEpi>(x.data(), y.data(), s, w, n, fill, StitchNoEpi{});
        if (mode == 6) stitch_window_kernel<6, I, StitchNoEpi>(x.data(), y.data(), s, w, n, fill, StitchNoEpi{});
      });
    };
    if (wide) go(uint64_t{}); else go(uint32_t{});
  } else if (what == "nll") {  // nll classes inner ignore n targets...
    const int64_t classes = atoll(argv[2]), inner = atoll(argv[3]), ignore = atoll(argv[4]);
    const int64_t n = atoll(argv[5]);
    std::vector<int64_t> t(n);
    for (int64_t i = 0; i < n; ++i) t[i] = atoll(argv[6 + i]);
    const std::vector<float> x = ramp(n / inner * classes * inner);
    y.assign(2 * n, -1.0f);
    run(2, 1, 4, [&] { stitch_nll_pick_kernel(x.data(), t.data(), y.data(), n, classes, inner, ignore); });
  } else {  // concat[-slices] first outer inner size0 size1 size2 total grid [gy] (three parts; grid: blocks for all)
    const int64_t first = atoll(argv[2]), outer = atoll(argv[3]), inner = atoll(argv[4]);
    const int64_t total = atoll(argv[8]);
    StitchConcatParts<3> p;
    std::vector<std::vector<float>> parts(3);
    p.start[0] = first;
    for (int i = 0; i < 3; ++i) {
      const int64_t size = atoll(argv[5 + i]);
      parts[i].resize(outer * size * inner);
      for (size_t k = 0; k < parts[i].size(); ++k) parts[i][k] = 1000.0f * (i + 1) + (float)k;
      p.ptr[i] = parts[i].data();
      p.start[i + 1] = p.start[i] + size;
    }
    y.assign(outer * total * inner, -1.0f);
    const unsigned blocks = stitch_concat_blocks(p, y.data(), outer, total, inner, (unsigned)atoi(argv[9]));
    fprintf(stderr, "%u %u %u %u\n", p.first_block[0], p.first_block[1], p.first_block[2], p.first_block[3]);
    if (what == "concat-slices") {  // gy rows of blocks walk the outer index; the epilogue sees each element's index
      run(blocks, (unsigned)atoi(argv[10]), 16,
          [&] { stitch_concat_slices_kernel<3, Plus>(p, y.data(), outer, total, inner, Plus{}); });
    } else {
      run(blocks, 1, 16, [&] { stitch_concat_kernel<3, StitchNoEpi>(p, y.data(), outer, total, inner, StitchNoEpi{}); });
    }
  }
  fprintf(stderr, "%d\n", stitch_vector_copies);
  for (float v : y) printf("%.4f\n", v);
  return 0;
}
"""


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_emulator(tmp_path_factory.mktemp("layout_emulation"), EMULATION)


def _emulate(binary: Path, *args: Any) -> torch.Tensor:
    return _emulate_counting(binary, *args)[0]


def _emulate_counting(binary: Path, *args: Any) -> tuple[torch.Tensor, int]:
    """(output, how many blocks checked the float4 path's alignment: > 0 when they could take it)."""
    proc = subprocess.run([str(binary), *map(str, args)], check=True, capture_output=True, text=True)
    return torch.tensor([float(v) for v in proc.stdout.split()]), int(proc.stderr.split()[-1])


@pytest.mark.parametrize("wide", [0, 1])
@pytest.mark.parametrize(
    "make",
    [
        lambda b: b.view(2, 3, 2, 5, 7).transpose(1, 2),  # a channel shuffle
        lambda b: b.permute(0, 3, 1, 2),
        lambda b: b[:, 1:4, :, ::2],
        lambda b: b.transpose(-1, -2)[..., 1:],
        lambda b: b[:1, :1].expand(3, 4, 5, 7),
    ],
)
def test_the_gather_kernel_copies_strided_views(emulator: Path, make: Any, wide: int) -> None:
    base = torch.arange(2 * 6 * 5 * 7, dtype=torch.float32).view(2, 6, 5, 7)
    view = make(base)
    dims = _stitch_dims(view)  # the dim merge the helper does
    sizes, strides = [d[0] for d in dims], [d[1] for d in dims]
    got = _emulate(emulator, "gather", 0, wide, 0, len(dims), *sizes, *strides, base.numel())
    # element i of the base holds i, and the helper passes data_ptr() (the view's first element)
    assert torch.equal(got.view(view.shape) + view.storage_offset(), view.contiguous())


@pytest.mark.parametrize("wide", [0, 1])
@pytest.mark.parametrize(
    "pads",
    [
        (1, 2, 0, 3),  # last dim 1 before / 2 after, the one before 3 after
        (0, 0, 2, 1, 1, 0),  # Swin's window padding on (H, W) of (B, H, W, C), one more dim
        (-1, 2, 1, -2),  # negative pads crop
    ],
)
def test_the_window_kernel_pads_like_f_pad(emulator: Path, pads: tuple[int, ...], wide: int) -> None:
    base = torch.arange(2 * 6 * 5 * 7, dtype=torch.float32).view(2, 6, 5, 7)
    view = base.transpose(1, 2)  # a strided input
    expected = torch.nn.functional.pad(view, pads, value=-7.5)
    lo = [0] * view.dim()
    for i in range(len(pads) // 2):
        lo[view.dim() - 1 - i] = pads[2 * i]
    out_sizes, in_sizes, strides = list(expected.shape), list(view.shape), list(view.stride())
    args = [3, wide, -7.5, view.dim(), *out_sizes, *in_sizes, *strides, *lo, *[0] * view.dim(), base.numel()]
    got = _emulate(emulator, "window", *args).view(expected.shape)
    assert torch.equal(got, expected)


@pytest.mark.parametrize(("shifts", "dims"), [((3,), (2,)), ((-2, 4), (1, 3)), ((9, -13), (0, 2))])
def test_the_window_kernel_rolls_like_torch_roll(
    emulator: Path, shifts: tuple[int, ...], dims: tuple[int, ...]
) -> None:
    base = torch.arange(2 * 6 * 5 * 7, dtype=torch.float32).view(2, 6, 5, 7)
    view = base.permute(0, 2, 1, 3)
    expected = torch.roll(view, shifts, dims)
    lo = [0] * view.dim()
    for shift, dim in zip(shifts, dims, strict=True):
        lo[dim] = shift
    sizes, strides = list(view.shape), list(view.stride())
    shift = [0] * view.dim()
    got = _emulate(
        emulator, "window", 4, 0, 0.0, view.dim(), *sizes, *sizes, *strides, *lo, *shift, base.numel()
    )
    assert torch.equal(got.view(expected.shape), expected)


@pytest.mark.parametrize(("mode", "diag"), [(1, 0), (1, -2), (1, 3), (2, 0), (2, 2), (2, -1)])
def test_the_triangle_kernel_matches_tril_and_triu(emulator: Path, mode: int, diag: int) -> None:
    base = torch.arange(3 * 5 * 7, dtype=torch.float32).view(3, 7, 5).transpose(1, 2)  # strided input
    sizes, strides = list(base.shape), list(base.stride())
    got = _emulate(emulator, "gather", mode, 0, diag, 3, *sizes, *strides, base.numel()).view(3, 5, 7)
    expected = torch.tril(base, diag) if mode == 1 else torch.triu(base, diag)
    if mode == 2:  # the Plus epilogue adds 0.001 * e to every element, masked ones too
        expected = expected + 0.001 * torch.arange(expected.numel(), dtype=torch.float32).view(3, 5, 7)
    torch.testing.assert_close(got, expected, atol=1e-3, rtol=0)


@pytest.mark.parametrize(
    ("first", "outer", "inner", "sizes", "grid"),
    [
        (0, 2, 35, (6, 1, 3), 3),
        (4, 3, 1, (2, 5, 1), 2),  # fewer blocks asked for than parts: each part still gets one
        (0, 3, 8, (2, 1, 3), 12),
        (4, 2, 1, (8, 4, 12), 6),
        (0, 2, 1, (4, 2, 2), 8),  # float4s in the first part only: blocks follow the work items
    ],
)
def test_the_concat_kernel_writes_each_part_into_its_slice(
    emulator: Path, first: int, outer: int, inner: int, sizes: tuple[int, int, int], grid: int
) -> None:
    total = first + sum(sizes)
    args = ["concat", first, outer, inner, *sizes, total, grid]
    proc = subprocess.run([str(emulator), *map(str, args)], check=True, capture_output=True, text=True)
    got = torch.tensor([float(v) for v in proc.stdout.split()]).view(outer, total, inner)
    *first_block, vector_checks = (int(v) for v in proc.stderr.split()[-5:])
    blocks = [b - a for a, b in zip(first_block[:-1], first_block[1:], strict=True)]
    starts = [first + sum(sizes[:i]) for i in range(3)]
    vec = [
        s * inner % 4 == 0 and b * inner % 4 == 0 and total * inner % 4 == 0
        for s, b in zip(sizes, starts, strict=True)
    ]
    # every part gets blocks, in proportion to its work items (float4s where it moves them)
    units = [outer * s * inner // (4 if v else 1) for s, v in zip(sizes, vec, strict=True)]
    assert first_block[0] == 0 and min(blocks) >= 1
    assert all(abs(b - grid * u / sum(units)) <= 1 for b, u in zip(blocks, units, strict=True) if b > 1)
    assert (vector_checks > 0) is any(vec)
    parts = [
        1000.0 * (i + 1) + torch.arange(outer * s * inner).view(outer, s, inner) for i, s in enumerate(sizes)
    ]
    assert torch.equal(got[:, first:], torch.cat(parts, 1).float())
    assert bool((got[:, :first] == -1).all())  # an earlier launch's columns are left alone


@pytest.mark.parametrize(
    ("first", "outer", "inner", "sizes", "grid", "gy"),
    [
        (0, 3, 8, (2, 5, 1), 6, 2),  # two rows of blocks for three outer slices: one row walks two
        (4, 2, 12, (3, 1, 2), 3, 1),  # after an earlier launch's columns; a part with one block
        (0, 1, 64, (4, 2, 8), 5, 1),  # slices longer than a block's threads times the unroll
    ],
)
def test_the_concat_slices_kernel_copies_whole_float4_slices_through_the_epilogue(
    emulator: Path, first: int, outer: int, inner: int, sizes: tuple[int, int, int], grid: int, gy: int
) -> None:
    total = first + sum(sizes)
    args = ["concat-slices", first, outer, inner, *sizes, total, grid, gy]
    proc = subprocess.run([str(emulator), *map(str, args)], check=True, capture_output=True, text=True)
    got = torch.tensor([float(v) for v in proc.stdout.split()]).view(outer, total, inner)
    parts = [
        1000.0 * (i + 1) + torch.arange(outer * s * inner).view(outer, s, inner) for i, s in enumerate(sizes)
    ]
    index = torch.arange(outer * total * inner, dtype=torch.float64).view(outer, total, inner)
    want = torch.cat(parts, 1).double() + 0.001 * index[:, first:]  # the epilogue's element index
    assert torch.allclose(got[:, first:].double(), want, atol=1e-2, rtol=0)
    assert bool((got[:, :first] == -1).all())


@pytest.mark.parametrize(("inner", "targets"), [(1, [3, 0, -100, 6, 5]), (3, [0, 6, 2, -100, 1, 1, 4, 5, 3])])
def test_the_nll_pick_kernel_picks_the_target_class_and_weighs_ignored_samples(
    emulator: Path, inner: int, targets: list[int]
) -> None:
    classes, n = 7, len(targets)
    got = _emulate(emulator, "nll", classes, inner, -100, n, *targets).view(2, n)
    x = torch.arange(n // inner * classes * inner, dtype=torch.float32).view(n // inner, classes, inner)
    t = torch.tensor(targets).view(n // inner, inner)
    from codegen.emit.runtime import _stitch_nll_pick  # the PyTorch form the demoted program runs

    assert torch.equal(got, _stitch_nll_pick(x, t, 1, -100).view(2, n))


def test_an_out_of_range_target_reads_nan_not_memory(emulator: Path) -> None:
    got = _emulate(emulator, "nll", 4, 1, -100, 3, 1, 4, -5).view(2, 3)
    assert got[0, 0] == 1.0 and torch.isnan(got[0, 1:]).all() and torch.equal(got[1], torch.ones(3))


def _plus(expected: torch.Tensor) -> torch.Tensor:
    """The emulator's float4 runs store through the `Plus` epilogue: v + 0.001 * (output index)."""
    return expected + 0.001 * torch.arange(expected.numel(), dtype=torch.float32).view(expected.shape)


@pytest.mark.parametrize("wide", [0, 1])
def test_the_float4_gather_moves_rows_of_whole_float4s(emulator: Path, wide: int) -> None:
    base = torch.arange(2 * 6 * 5 * 8, dtype=torch.float32).view(2, 6, 5, 8)
    view = base.permute(0, 2, 1, 3)[:, 1:]  # the last dim untouched, every other stride a multiple of 4
    sizes, strides = list(view.shape), list(view.stride())
    got = _emulate(emulator, "gather4", 0, wide, 0, view.dim(), *sizes, *strides, base.numel())
    expected = view.contiguous() - view.storage_offset()  # the emulator's x starts at element 0
    torch.testing.assert_close(got.view(view.shape), _plus(expected), rtol=0, atol=1e-4)


@pytest.mark.parametrize("mode", [3, 4])
def test_the_float4_window_pads_and_rolls_the_outer_dims(emulator: Path, mode: int) -> None:
    base = torch.arange(2 * 6 * 5 * 8, dtype=torch.float32).view(2, 6, 5, 8)
    view = base.transpose(1, 2)  # (2, 5, 6, 8), channels last and contiguous
    if mode == 3:
        expected = torch.nn.functional.pad(view, (0, 0, 1, 2, 2, 0), value=-7.5)
        lo = [0, 2, 1, 0]
    else:
        expected = torch.roll(view, (-3, 4), (1, 2))
        lo = [0, -3, 4, 0]
    out_sizes, in_sizes, strides = list(expected.shape), list(view.shape), list(view.stride())
    args = [mode, 0, -7.5, view.dim(), *out_sizes, *in_sizes, *strides, *lo, *[0] * view.dim(), base.numel()]
    got = _emulate(emulator, "window4", *args).view(expected.shape)
    torch.testing.assert_close(got, _plus(expected), rtol=0, atol=1e-4)


@pytest.mark.parametrize("wide", [0, 1])
@pytest.mark.parametrize(
    ("mode", "pads", "shifts"),
    [
        (5, (0, 0, 0, 2, 0, 2), (0, -3, -3, 0)),  # Swin: roll (H, W) back, then pad them at the end
        (5, (1, -2, 2, 1), (0, 0, 4, -9)),  # a crop of the rolled map
        (6, (0, 0, 0, 2, 0, 2), (0, 3, 3, 0)),  # pad, then roll the padded map
        (6, (2, 1, -1, 0), (1, 0, -2, 5)),
    ],
)
def test_the_window_kernel_rolls_and_pads_in_one_pass(
    emulator: Path, mode: int, pads: tuple[int, ...], shifts: tuple[int, ...], wide: int
) -> None:
    base = torch.arange(2 * 6 * 5 * 7, dtype=torch.float32).view(2, 6, 5, 7)
    view = base.transpose(1, 2)  # a strided input
    dims = tuple(range(view.dim()))
    pad = torch.nn.functional.pad
    if mode == 5:
        expected = pad(torch.roll(view, shifts, dims), pads, value=-7.5)
    else:
        expected = torch.roll(pad(view, pads, value=-7.5), shifts, dims)
    lo = [0] * view.dim()
    for i in range(len(pads) // 2):
        lo[view.dim() - 1 - i] = pads[2 * i]
    out_sizes, in_sizes, strides = list(expected.shape), list(view.shape), list(view.stride())
    args = [mode, wide, -7.5, view.dim(), *out_sizes, *in_sizes, *strides, *lo, *shifts, base.numel()]
    got = _emulate(emulator, "window", *args).view(expected.shape)
    assert torch.equal(got, expected)
