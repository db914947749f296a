"""Pooling and normalisation classification on the CPU (issue 19, pool helper).

Global adaptive pools become covered reductions; windowed pools are one covered pool group with the
epilogue; BatchNorm1d/3d and group/instance norm are covered. The nvcc build of a program holding every
kind is in test_codegen_build.py (fixture level2/11_Pool_Families); numerics in tests/gpu/test_pool_gpu.py.
The pooling kernel's window math (taps, padding, dilation, ceil mode, divisors; windows baked in as
template arguments or read at run time) also runs here, compiled as plain C++ against PyTorch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.host_emulation import common_section

from codegen.frontend.pool_ops import pool_out_size
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import analyse
from graph.artifacts import Task

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = {module}

    def forward(self, x):
        return torch.relu(self.op(x))


def get_inputs():
    return [torch.rand{shape}]


def get_init_inputs():
    return []
"""


def plan_of(module: str, shape: tuple[int, ...]):  # noqa: ANN201 - a graph.artifacts Plan
    source = PROBLEM.format(module=module, shape=shape)
    return OfflinePolicy().plan(Task(name="pool", path="pool.py", source=source), None), source


@pytest.mark.parametrize(
    ("module", "shape", "op"),
    [
        ("nn.AdaptiveAvgPool2d(1)", (2, 8, 9, 7), "mean"),
        ("nn.AdaptiveAvgPool1d(1)", (2, 8, 33), "mean"),
        ("nn.AdaptiveMaxPool3d((1, 1, 1))", (2, 4, 3, 5, 6), "amax"),
    ],
)
def test_global_adaptive_pool_is_a_covered_reduction(module: str, shape: tuple[int, ...], op: str) -> None:
    plan, source = plan_of(module, shape)
    assert plan.uncovered_ops == []
    analysis = analyse(Task(name="pool", path="pool.py", source=source))
    anchor = analysis.groups[0].anchor
    assert anchor.family == "reduction" and anchor.op == op
    assert anchor.args["dims"] == list(range(len(shape) - (len(shape) - 2), len(shape)))
    assert anchor.args["keepdim"] is True


@pytest.mark.parametrize(
    ("module", "shape"), [("nn.BatchNorm1d(8)", (4, 8, 17)), ("nn.BatchNorm3d(4)", (2, 4, 3, 5, 6))]
)
def test_batch_norm_1d_and_3d_are_covered(module: str, shape: tuple[int, ...]) -> None:
    plan, _ = plan_of(module, shape)
    assert plan.uncovered_ops == []


@pytest.mark.parametrize(
    ("module", "shape"),
    [
        ("nn.GroupNorm(2, 8)", (2, 8, 5, 5)),
        ("nn.InstanceNorm2d(8)", (2, 8, 5, 5)),
    ],
)
def test_group_and_instance_norm_are_covered(module: str, shape: tuple[int, ...]) -> None:
    plan, _ = plan_of(module, shape)
    assert plan.uncovered_ops == []
    assert plan.groups[0].template == "gn_fused_epilogue"  # as the program names it


@pytest.mark.parametrize(
    ("module", "shape", "template"),
    [
        ("nn.MaxPool3d(3, 2, 1, ceil_mode=True)", (2, 4, 7, 9, 8), "pool_max+epilogue"),
        (
            "nn.AvgPool2d(3, 2, 1, count_include_pad=False, divisor_override=None)",
            (2, 4, 9, 9),
            "pool_avg+epilogue",
        ),
        ("nn.MaxPool1d(4, 2, 1, dilation=2)", (2, 4, 23), "pool_max+epilogue"),
        ("nn.AdaptiveAvgPool2d((3, 5))", (2, 4, 9, 11), "pool_adaptive_avg+epilogue"),
    ],
)
def test_windowed_pools_are_one_covered_group_with_the_epilogue(
    module: str, shape: tuple[int, ...], template: str
) -> None:
    plan, _ = plan_of(module, shape)
    assert plan.uncovered_ops == []
    assert [g.template for g in plan.groups] == [template]


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding", "dilation"), [(17, 3, 2, 1, 1), (10, 2, 3, 0, 2), (8, 4, 4, 2, 1)]
)
def test_pool_out_size_matches_pytorch(
    size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool
) -> None:
    import torch
    import torch.nn.functional as F

    y = F.max_pool1d(torch.zeros(1, 1, size), kernel, stride, padding, dilation, ceil_mode)
    assert pool_out_size(size, kernel, stride, padding, dilation, ceil_mode) == y.shape[-1]


@pytest.mark.parametrize(
    ("module", "shape", "window"),
    [
        ("nn.MaxPool3d(3, 2, 1, ceil_mode=True)", (2, 4, 7, 9, 8), "0, 3, 3, 3, 2, 1"),
        ("nn.AvgPool2d(3, 2, 1, count_include_pad=False)", (2, 4, 9, 9), "1, 1, 3, 3, 2, 1"),
        ("nn.MaxPool1d(4, 2, 1, dilation=2)", (2, 4, 23), "0, 1, 1, 4, 2, 2"),
        ("nn.AvgPool2d(9, 1)", (2, 4, 19, 19), "1, 0, 0, 0, 0, 0"),  # 81 taps: too many to unroll
        ("nn.AdaptiveAvgPool2d((3, 5))", (2, 4, 9, 11), "2, 0, 0, 0, 0, 0"),  # windows vary: read at run time
    ],
)
def test_small_fixed_windows_are_baked_into_the_kernel(
    module: str, shape: tuple[int, ...], window: str
) -> None:
    """The launcher passes the window (and the width's stride and dilation, for four outputs a thread) as
    template arguments, so the kernel's window loops unroll."""
    source = PROBLEM.format(module=module, shape=shape)
    task = Task(name="pool", path="pool.py", source=source)
    policy = OfflinePolicy()
    candidate = policy.write(task, policy.plan(task, None), 1)
    assert f"stitch_pool_run<{window}, " in candidate.source


# ----------------------------------------------------------------------------------------------
# The pooling kernel's window math on the CPU (templates/pool.cuh compiled as plain C++)
# ----------------------------------------------------------------------------------------------

POOL_EMULATION = r"""
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
using std::max;
using std::min;
struct StitchDim3 { unsigned x = 1, y = 1, z = 1; };
static StitchDim3 blockIdx, threadIdx, gridDim, blockDim;
struct Load { const float* x; float load(int64_t i) const { return x[i]; } };
struct Same { float apply(float v, int64_t) const { return v; } };
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
static float2 make_float2(float x, float y) { return {x, y}; }
static float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static void stitch_st4_v(float* p, float4 v) { p[0] = v.x; p[1] = v.y; p[2] = v.z; p[3] = v.w; }
@MINMAX@
#define STITCH_HOST_EMULATION
#include "pool.cuh"

template <int MODE, int KD, int KH, int KW>
static void run(const StitchPoolShape& s, const float* x, float* y) {
  gridDim = {3, 1, 1};  // a grid-stride loop over three small blocks
  blockDim = {32, 1, 1};
  for (unsigned b = 0; b < 3; ++b)
    for (unsigned t = 0; t < 32; ++t) {
      blockIdx = {b, 1, 1};
      threadIdx = {t, 1, 1};
      stitch_pool_kernel<MODE, KD, KH, KW, int, Load, Same>(Load{x}, y, s, stitch_pool_index(s), Same{});
    }
}

// The four-outputs-a-thread kernel over the same three blocks, its width counted in groups of four.
template <int MODE, int KD, int KH, int KW, int SW, int DW>
static void runv(const StitchPoolShape& s, const float* x, float* y) {
  StitchPoolShape g = s;
  g.ow = (s.ow + 3) / 4;
  gridDim = {3, 1, 1};
  blockDim = {32, 1, 1};
  for (unsigned b = 0; b < 3; ++b)
    for (unsigned t = 0; t < 32; ++t) {
      blockIdx = {b, 1, 1};
      threadIdx = {t, 1, 1};
      stitch_pool_rowvec_kernel<MODE, KD, KH, KW, SW, DW, 4, int, Load, Same>(Load{x}, y, s, g, stitch_pool_index(g),
                                                                             Same{});
    }
}

// argv: mode baked planes id ih iw od oh ow kd kh kw sd sh sw pd ph pw dd dh dw cip divisor input.bin
// (baked: 0 the window read at run time, 1 baked in, 2 baked in with four outputs a thread)
int main(int argc, char** argv) {
  const int mode = atoi(argv[1]), baked = atoi(argv[2]);
  int64_t v[7];
  int w[14];
  for (int i = 0; i < 7; ++i) v[i] = atoll(argv[3 + i]);
  for (int i = 0; i < 14; ++i) w[i] = atoi(argv[10 + i]);
  const StitchPoolShape s{v[0], v[1], v[2], v[3], v[4], v[5], v[6], w[0], w[1], w[2], w[3], w[4], w[5],
                          w[6], w[7], w[8], w[9], w[10], w[11], w[12], w[13]};
  std::vector<float> x(v[0] * v[1] * v[2] * v[3]);
  FILE* f = fopen(argv[24], "rb");
  if (f == nullptr || fread(x.data(), sizeof(float), x.size(), f) != x.size()) return 2;
  fclose(f);
  std::vector<float> y(v[0] * v[4] * v[5] * v[6], -12345.f);
  const int k = w[0] * 100 + w[1] * 10 + w[2];  // the window, for the baked instantiations below
  if (!baked && mode == 0) run<0, 0, 0, 0>(s, x.data(), y.data());
  if (!baked && mode == 1) run<1, 0, 0, 0>(s, x.data(), y.data());
  if (mode == 2) run<2, 0, 0, 0>(s, x.data(), y.data());
  if (mode == 3) run<3, 0, 0, 0>(s, x.data(), y.data());
  const int step = w[5] * 10 + w[11];  // the width's stride and dilation
  if (baked == 2) {
    if (mode == 0 && k == 333 && step == 21) runv<0, 3, 3, 3, 2, 1>(s, x.data(), y.data());
    if (mode == 0 && k == 133 && step == 21) runv<0, 1, 3, 3, 2, 1>(s, x.data(), y.data());
    if (mode == 0 && k == 114 && step == 23) runv<0, 1, 1, 4, 2, 3>(s, x.data(), y.data());
    if (mode == 0 && k == 122 && step == 21) runv<0, 1, 2, 2, 2, 1>(s, x.data(), y.data());
    if (mode == 1 && k == 133 && step == 21) runv<1, 1, 3, 3, 2, 1>(s, x.data(), y.data());
    if (mode == 1 && k == 133 && step == 11) runv<1, 1, 3, 3, 1, 1>(s, x.data(), y.data());
    if (mode == 1 && k == 333 && step == 21) runv<1, 3, 3, 3, 2, 1>(s, x.data(), y.data());
    if (mode == 1 && k == 125 && step == 21) runv<1, 1, 2, 5, 2, 1>(s, x.data(), y.data());
    for (float value : y) printf("%.9g\n", value);
    return 0;
  }
  if (baked && mode == 0 && k == 333) run<0, 3, 3, 3>(s, x.data(), y.data());
  if (baked && mode == 0 && k == 133) run<0, 1, 3, 3>(s, x.data(), y.data());
  if (baked && mode == 0 && k == 114) run<0, 1, 1, 4>(s, x.data(), y.data());
  if (baked && mode == 0 && k == 122) run<0, 1, 2, 2>(s, x.data(), y.data());
  if (baked && mode == 1 && k == 133) run<1, 1, 3, 3>(s, x.data(), y.data());
  if (baked && mode == 1 && k == 333) run<1, 3, 3, 3>(s, x.data(), y.data());
  if (baked && mode == 1 && k == 125) run<1, 1, 2, 5>(s, x.data(), y.data());
  for (float value : y) printf("%.9g\n", value);
  return 0;
}
""".replace("@MINMAX@", common_section("minmax"))


@pytest.fixture(scope="module")
def pool_emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support.host_emulation import build_emulator

    return build_emulator(tmp_path_factory.mktemp("pool_emulation"), POOL_EMULATION)


WINDOW_CASES = [
    ("max", 3, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 7, 9, 8)),
    ("max", 2, {"kernel_size": 3, "stride": 2, "padding": 1}, (2, 3, 11, 10)),
    ("max", 1, {"kernel_size": 4, "stride": 2, "padding": 2, "dilation": 3}, (2, 4, 37)),
    ("max", 2, {"kernel_size": 2, "stride": 2, "ceil_mode": True}, (1, 2, 9, 7)),
    ("avg", 2, {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 11, 10)),
    ("avg", 2, {"kernel_size": 3, "stride": 1, "padding": 1, "count_include_pad": True}, (1, 2, 6, 5)),
    ("avg", 3, {"kernel_size": 3, "stride": 2, "padding": 1}, (1, 2, 7, 6, 9)),
    (
        "avg",
        2,
        {"kernel_size": (2, 5), "stride": (1, 2), "padding": (1, 2), "divisor_override": 7},
        (1, 2, 6, 11),
    ),
    ("adaptive_avg", 2, {"output_size": (3, 4)}, (2, 3, 11, 10)),
    ("adaptive_max", 3, {"output_size": (2, 3, 2)}, (1, 2, 5, 7, 6)),
]
# each fixed window three times: read from the shape at run time, baked in as template arguments, and
# baked in with four outputs a thread (the launch knob `outs`)
BAKED_CASES = [
    (*case, baked) for case in WINDOW_CASES for baked in ((0,) if "adaptive" in case[0] else (0, 1, 2))
]


@pytest.mark.parametrize(("kind", "nd", "kwargs", "shape", "baked"), BAKED_CASES)
def test_the_pool_kernel_matches_pytorch_with_baked_and_runtime_windows(
    pool_emulator: Path, tmp_path: Path, kind: str, nd: int, kwargs: dict, shape: tuple[int, ...], baked: int
) -> None:
    """Every window tap the unrolled loops take is the one PyTorch takes: padding, dilation, ceil mode,
    the divisor's clipping; the same kernel with the window read at run time agrees, and so does the
    kernel with four outputs a thread (its rows cut short where the width is not a multiple of four)."""
    import subprocess

    import torch
    import torch.nn.functional as F

    from codegen.emit.pool import _MODES

    torch.manual_seed(0)
    x = torch.randn(shape)
    x.view(-1)[::7] = x.view(-1)[1::7][: x.view(-1)[::7].numel()]  # ties: the first maximum must win
    y = getattr(F, f"{kind}_pool{nd}d")(x, **kwargs)
    pad3 = lambda v, fill: [fill] * (3 - nd) + (list(v) if isinstance(v, tuple) else [v] * nd)  # noqa: E731
    spatial_in, spatial_out = pad3(tuple(shape[2:]), 1), pad3(tuple(y.shape[2:]), 1)
    if kind.startswith("adaptive"):
        window = [1] * 12
    else:
        stride = kwargs.get("stride", kwargs["kernel_size"])
        window = pad3(kwargs["kernel_size"], 1) + pad3(stride, 1) + pad3(kwargs.get("padding", 0), 0)
        window += pad3(kwargs.get("dilation", 1), 1)
    cip = int(kwargs.get("count_include_pad", True))
    divisor = int(kwargs.get("divisor_override") or 0)
    planes = shape[0] * shape[1]
    (tmp_path / "x.bin").write_bytes(x.numpy().astype("float32").tobytes())
    args = [str(_MODES[kind]), str(baked), str(planes), *map(str, spatial_in), *map(str, spatial_out)]
    args += [*map(str, window), str(cip), str(divisor), str(tmp_path / "x.bin")]
    out = subprocess.run([str(pool_emulator), *args], capture_output=True, text=True, timeout=60, check=True)
    got = torch.tensor([float(v) for v in out.stdout.split()]).view(y.shape)
    torch.testing.assert_close(got, y, atol=1e-6, rtol=1e-6)


DIVIDER_EMULATION = (
    POOL_EMULATION.split('#include "pool.cuh"')[0]
    + r"""#include "pool.cuh"

// argv: divisors, then numerators; prints the numerators whose quotient or remainder is wrong
int main(int argc, char** argv) {
  const int nd = atoi(argv[1]);
  int bad = 0;
  for (int i = 0; i < nd; ++i) {
    const unsigned d = (unsigned)atoll(argv[2 + i]);
    const StitchDivider v = stitch_divider(d);
    for (int j = 2 + nd; j < argc; ++j) {
      const int n = atoi(argv[j]);
      int rem = -1;
      const int q = stitch_divmod(n, v, rem);
      if (q != n / (int)d || rem != n % (int)d) {
        printf("%d / %u: %d rem %d\n", n, d, q, rem);
        ++bad;
      }
    }
  }
  return bad == 0 ? 0 : 1;
}
"""
)


def test_the_index_divider_matches_integer_division(tmp_path: Path) -> None:
    """The pool kernels' 32-bit dividers: quotient and remainder equal `/` and `%` for divisors from 1
    to 2^31 - 1 (powers of two and their neighbours, primes, the suite's extents) and numerators up to
    2^31 - 1."""
    import random
    import subprocess

    from support.host_emulation import build_emulator

    binary = build_emulator(tmp_path, DIVIDER_EMULATION)
    rng = random.Random(0)
    divisors = {1, 2, 3, 7, 255, 256, 257, 16382, 65535, 65536, 65537, 2**31 - 1, 2**30, 2**30 + 1}
    divisors |= {2**k + o for k in range(1, 31) for o in (-1, 1)}
    divisors |= {rng.randrange(1, 2**31) for _ in range(40)}
    numerators = {0, 1, 2**31 - 1, 2**31 - 2, 2**30, 2**16 - 1, 2**16}
    numerators |= {rng.randrange(0, 2**31) for _ in range(300)}
    divs, nums = sorted(divisors), sorted(numerators)
    done = subprocess.run(
        [str(binary), str(len(divs)), *map(str, divs), *map(str, nums)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
