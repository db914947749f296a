"""Our depthwise convolution kernel (templates/conv_dw.cuh) run on the CPU, phase by phase.

The block decomposition, the staging of the zero-padded tile (several loads in flight per thread)
and each thread's outputs compile as plain C++ (STITCH_HOST_EMULATION). A block runs here as the GPU
runs it across its __syncthreads: every thread stages its share, then every thread computes its
outputs. The result must equal PyTorch's convolution to float rounding; the tiling (32 x 32 outputs
on 32 x 8 threads for 2-D, 256 outputs of a row for 1-D) is the launcher's (templates/conv.cuh).
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
#define __forceinline__ inline
#define __restrict__
#define __ldg(p) (*(p))
@CARRY@
#define STITCH_HOST_EMULATION
#include "conv_dw.cuh"

// args: N C K H W KH KW SH SW PH PW DH DW act flat, then x (N*C*H*W), w (K*KH*KW), bias (K) on stdin
int main(int argc, char** argv) {
  int v[15];
  for (int i = 0; i < 15; ++i) v[i] = atoi(argv[i + 1]);
  const int N = v[0], C = v[1], K = v[2], H = v[3], W = v[4], KH = v[5], KW = v[6], SH = v[7], SW = v[8];
  const int PH = v[9], PW = v[10], DH = v[11], DW = v[12], act = v[13], flat = v[14];
  const int OH = (H + 2 * PH - DH * (KH - 1) - 1) / SH + 1, OW = (W + 2 * PW - DW * (KW - 1) - 1) / SW + 1;
  std::vector<float> x((size_t)N * C * H * W), w((size_t)K * KH * KW), bias(K), y((size_t)N * K * OH * OW, NAN);
  for (float& f : x) scanf("%f", &f);
  for (float& f : w) scanf("%f", &f);
  for (float& f : bias) scanf("%f", &f);
  const int tile_w = flat ? 256 : 32, tile_h = flat ? 1 : 32;
  const int nx = tile_w, ny = (tile_h + STITCH_DW_ROWS - 1) / STITCH_DW_ROWS;
  const int tile_h_in = (tile_h - 1) * SH + (KH - 1) * DH + 1, tile_w_in = (tile_w - 1) * SW + (KW - 1) * DW + 1;
  const int tiles_w = (OW + tile_w - 1) / tile_w, tiles_h = (OH + tile_h - 1) / tile_h;
  std::vector<float> tile((size_t)tile_h_in * tile_w_in), weights((size_t)KH * KW);
  for (int64_t block = 0; block < (int64_t)tiles_w * tiles_h * N * K; ++block) {
    const StitchDwBlock b = stitch_dw_block(block, C, K, tiles_w, tiles_h, tile_h, tile_w, SH, SW, PH, PW);
    for (int i = 0; i < KH * KW; ++i) weights[i] = w[(size_t)b.oc * KH * KW + i];
    std::fill(tile.begin(), tile.end(), NAN);  // anything not staged shows up as NaN
    for (int tid = 0; tid < nx * ny; ++tid)
      stitch_dw_stage(x.data() + (b.image * C + b.ic) * (int64_t)H * W, tile.data(), H, W, b.ih0, b.iw0, tile_h_in,
                      tile_w_in, tid, nx * ny);
    for (int ty = 0; ty < ny; ++ty)
      for (int tx = 0; tx < nx; ++tx)
        stitch_dw_outputs(tile.data(), weights.data(), bias.data(), nullptr, y.data(), b.oc,
                          b.plane * (int64_t)OH * OW, b.oh0, b.ow0, OH, OW, KH, KW, SH, SW, DH, DW, act, tile_h,
                          tile_w_in, tx, ty, ny);
  }
  for (float f : y) printf("%.9g\n", f);
  return 0;
}
""".replace("@CARRY@", common_section("carry"))


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_emulator(tmp_path_factory.mktemp("dw_emulation"), EMULATION)


@pytest.mark.parametrize(
    ("n", "c", "k", "hw", "kernel", "stride", "pad", "dil", "act"),
    [
        (2, 3, 3, (37, 41), (3, 3), (1, 1), (1, 1), (1, 1), 0),  # tiles cut at both edges
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
        ),  # two outputs per channel, strided, dilated, ReLU
        (1, 2, 2, (70, 33), (3, 5), (1, 2), (1, 2), (1, 1), 0),  # asymmetric: the tile spans 35 rows
        (3, 2, 2, (1, 600), (1, 7), (1, 1), (0, 3), (1, 1), 0),  # 1-D (a unit height): 256 outputs a block
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
) -> None:
    torch.manual_seed(0)
    x = torch.rand(n, c, *hw) * 2 - 1
    w = torch.rand(k, 1, *kernel) * 2 - 1
    b = torch.rand(k) * 2 - 1
    flat = int(hw[0] == 1 and kernel[0] == 1)
    args = [n, c, k, *hw, *kernel, *stride, *pad, *dil, act, flat]
    data = " ".join(f"{v:.9g}" for v in torch.cat([x.flatten(), w.flatten(), b]).tolist())
    proc = subprocess.run(
        [str(emulator), *map(str, args)], input=data, check=True, capture_output=True, text=True
    )
    expected = F.conv2d(x.double(), w.double(), b.double(), stride, pad, dil, c)
    if act:
        expected = expected.clamp_min(0)
    got = torch.tensor([float(v) for v in proc.stdout.split()], dtype=torch.float64).view(expected.shape)
    assert not got.isnan().any(), "an output was never written or read an unstaged tap"
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
