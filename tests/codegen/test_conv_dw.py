"""Our depthwise convolution kernel (templates/conv_dw.cuh) run on the CPU, phase by phase.

The plan (the launcher's own tiling function), the block decomposition, the staging of the
zero-padded rows (16-byte chunks, several in flight per thread) and each thread's outputs through the
same compile-time window dispatch as the launcher compile as plain C++ (STITCH_HOST_EMULATION). A
block runs here as the GPU runs it across its __syncthreads: every thread of every plane slot stages
its share, then every thread computes its outputs. The result must equal PyTorch's convolution to
float rounding, with every output written and no unstaged tap read (NaN would show).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from support.host_emulation import build_emulator, common_section

EMULATION = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __ldg(p) (*(p))
@CARRY@
#define STITCH_HOST_EMULATION
#include "conv_dw.cuh"

// args: N C K H W KH KW SH SW PH PW DH DW act flat rows, then x (N*C*H*W), w (K*KH*KW), bias (K) on stdin
int main(int argc, char** argv) {
  int v[16];
  for (int i = 0; i < 16; ++i) v[i] = atoi(argv[i + 1]);
  const int N = v[0], C = v[1], K = v[2], H = v[3], W = v[4], KH = v[5], KW = v[6], SH = v[7], SW = v[8];
  const int PH = v[9], PW = v[10], DH = v[11], DW = v[12], act = v[13], flat = v[14];
  const int OH = (H + 2 * PH - DH * (KH - 1) - 1) / SH + 1, OW = (W + 2 * PW - DW * (KW - 1) - 1) / SW + 1;
  std::vector<float> x((size_t)N * C * H * W), w((size_t)K * KH * KW), bias(K), y((size_t)N * K * OH * OW, NAN);
  for (float& f : x) scanf("%f", &f);
  for (float& f : w) scanf("%f", &f);
  for (float& f : bias) scanf("%f", &f);
  const StitchDwPlan p = stitch_dw_plan(flat ? 1 : H, W, flat ? 1 : OH, OW, KH, KW, SH, SW, PH, PW, DH, DW,
                                        (int64_t)N * K, v[15]);
  if (p.smem == 0) return 3;
  StitchDwPlan q = p;
  q.vec_in = W % 4 == 0;  // the emulation's vectors are plain arrays: any alignment holds
  q.vec_out = OW % 4 == 0;
  const int64_t planes = (int64_t)N * K, groups = (planes + p.pz - 1) / p.pz;
  std::vector<float> shared((size_t)p.pz * p.region);
  for (int64_t block = 0; block < (int64_t)p.tiles_w * p.tiles_h * groups; ++block) {
    std::fill(shared.begin(), shared.end(), NAN);  // anything not staged shows up as NaN
    for (int z = 0; z < p.pz; ++z) {
      const StitchDwBlock b = stitch_dw_block(block, z, q, C, K);
      if (b.plane >= planes) continue;
      float* tile = shared.data() + (size_t)z * p.region;
      for (int i = 0; i < KH * KW; ++i) tile[p.rows_in * p.ld + i] = w[(size_t)b.oc * KH * KW + i];
      for (int tid = 0; tid < p.tx * p.ty; ++tid)
        stitch_dw_stage(x.data() + (b.image * C + b.ic) * (int64_t)H * W, tile, q, b.ih0, b.a0, tid, p.tx * p.ty);
    }
    for (int z = 0; z < p.pz; ++z) {  // after every slot staged: the block's __syncthreads
      const StitchDwBlock b = stitch_dw_block(block, z, q, C, K);
      if (b.plane >= planes) continue;
      const float* tile = shared.data() + (size_t)z * p.region;
      for (int ty = 0; ty < p.ty; ++ty)
        for (int tx = 0; tx < p.tx; ++tx)
          stitch_dw_dispatch(p, [&](auto kh, auto kw, auto sh, auto sw, auto r) {
            stitch_dw_outputs<decltype(kh)::value, decltype(kw)::value, decltype(sh)::value, decltype(sw)::value,
                              decltype(r)::value>(
                tile, bias[b.oc], nullptr, y.data(), b.plane * (int64_t)OH * OW, b.oh0, b.ow0, q, act, tx, ty);
          });
    }
  }
  fprintf(stderr, "variant %d rows %d tile %dx%d threads %dx%dx%d\n", p.variant, p.rows, p.tile_w, p.tile_h, p.tx,
          p.ty, p.pz);
  for (float f : y) printf("%.9g\n", f);
  return 0;
}
""".replace("@CARRY@", common_section("carry"))


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_emulator(tmp_path_factory.mktemp("dw_emulation"), EMULATION)


@pytest.mark.parametrize("rows", [4, 2])  # the conv search's two tilings (STITCH_DW_ALGO, STITCH_DW2_ALGO)
@pytest.mark.parametrize(
    ("n", "c", "k", "hw", "kernel", "stride", "pad", "dil", "act"),
    [
        (2, 3, 3, (37, 41), (3, 3), (1, 1), (1, 1), (1, 1), 0),  # 3x3 window, rows cut at the tile's edge
        (
            1,
            2,
            4,
            (45, 39),
            (5, 5),
            (2, 2),
            (4, 4),
            (2, 2),
            1,
        ),  # two outputs a channel, dilated: general loop
        (1, 2, 2, (70, 33), (3, 5), (1, 2), (1, 2), (1, 1), 0),  # asymmetric: general loop
        (3, 2, 2, (1, 600), (1, 7), (1, 1), (0, 3), (1, 1), 0),  # 1-D (a unit height), 16-byte rows
        (2, 4, 4, (32, 40), (3, 3), (2, 2), (1, 1), (1, 1), 1),  # 3x3 stride 2, 16-byte loads and stores
        (2, 3, 3, (20, 24), (5, 5), (1, 1), (2, 2), (1, 1), 0),  # 5x5: several planes a block
        (1, 2, 2, (300, 264), (7, 7), (1, 1), (3, 3), (1, 1), 0),  # 7x7, a row wider than one block
        (4, 8, 8, (7, 7), (3, 3), (1, 1), (1, 1), (1, 1), 0),  # 7x7 planes: many planes a block
        (1, 2, 2, (29, 29), (7, 7), (2, 2), (3, 3), (1, 1), 1),  # 7x7 stride 2
        (2, 2, 2, (19, 21), (3, 3), (1, 1), (0, 0), (1, 1), 0),  # unpadded 3x3: the general loop
        (
            1,
            3,
            6,
            (5, 3),
            (3, 3),
            (1, 1),
            (1, 1),
            (1, 1),
            1,
        ),  # two outputs a channel, rows of 3 (< one vector)
        (2, 4, 4, (2, 9), (5, 5), (2, 2), (2, 2), (1, 1), 0),  # a plane shorter than the window
    ],
)
def test_the_depthwise_kernel_matches_pytorch(
    emulator: Path,
    n: int,
    c: int,
    k: int,
    hw: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    pad: tuple[int, int],
    dil: tuple[int, int],
    act: int,
    rows: int,
) -> None:
    torch.manual_seed(0)
    x = torch.rand(n, c, *hw) * 2 - 1
    w = torch.rand(k, 1, *kernel) * 2 - 1
    b = torch.rand(k) * 2 - 1
    flat = int(hw[0] == 1 and kernel[0] == 1)
    args = [n, c, k, *hw, *kernel, *stride, *pad, *dil, act, flat, rows]
    data = " ".join(f"{v:.9g}" for v in torch.cat([x.flatten(), w.flatten(), b]).tolist())
    proc = subprocess.run(
        [str(emulator), *map(str, args)], input=data, check=True, capture_output=True, text=True
    )
    expected = F.conv2d(x.double(), w.double(), b.double(), stride, pad, dil, c)
    if act:
        expected = expected.clamp_min(0)
    got = torch.tensor([float(v) for v in proc.stdout.split()], dtype=torch.float64).view(expected.shape)
    assert not got.isnan().any(), "an output was never written or read an unstaged tap"
    square = kernel[0] == kernel[1] in (3, 5, 7) and stride[0] == stride[1] in (1, 2)
    compiled = square and dil == (1, 1) and pad[1] == (kernel[1] - 1) // 2
    assert ("variant 0 " not in proc.stderr) == compiled, proc.stderr  # the compile-time windows are used
    assert f" rows {rows} " in proc.stderr
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
