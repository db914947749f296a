"""The group-norm statistics' launch and per-thread sums (templates/groupnorm.cuh) run on the CPU.

The launch planner and each thread's share compile as plain C++ (STITCH_HOST_EMULATION): every
(block, job, thread) share is summed here as the grid-stride kernel's blocks would, so the split of
long slabs, the short-slab blocks and the float4 path are checked against float64 PyTorch without a
GPU. The block reduction itself is the shared one every row kernel uses.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from support.host_emulation import build_emulator, common_section

EMULATION = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define __global__
#define __host__
#define __device__
#define __forceinline__ inline
static void stitch_st4(float* p, const float v[4]) { for (int k = 0; k < 4; ++k) p[k] = v[k]; }
@SWEEP@
struct HostInput {
  const float* x;
  float load(int64_t e) const { return x[e]; }
  void load4(int64_t e, float* v) const { for (int k = 0; k < 4; ++k) v[k] = x[e + k]; }
};
#define STITCH_HOST_EMULATION
#include "groupnorm.cuh"

int main(int argc, char** argv) {
  const int64_t rows = atoll(argv[1]), seg = atoll(argv[2]), sms = atoll(argv[3]);
  const int vec = seg % 4 == 0;
  std::vector<float> x(rows * seg);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (float)((int64_t)(i * 7919) % 211) * 0.25f - 20.0f;
  const int per_sm = 2048 / stitch_gn_threads(seg) < 32 ? 2048 / stitch_gn_threads(seg) : 32;
  const StitchGnLaunch l = stitch_gn_stats_launch(rows, seg, sms, per_sm);
  fprintf(stderr, "%d %lld %lld %u\n", l.threads, (long long)l.splits, (long long)l.chunk, l.grid);
  std::vector<double> sum(rows, 0.0), sumsq(rows, 0.0);
  const HostInput pro{x.data()};
  for (unsigned block = 0; block < l.grid; ++block) {
    for (int64_t job = block; job < rows * l.splits; job += l.grid) {
      const int64_t row = job / l.splits, begin = (job % l.splits) * l.chunk;
      const int64_t end = begin + l.chunk < seg ? begin + l.chunk : seg;
      for (int t = 0; t < l.threads; ++t) {
        double s = 0.0, q = 0.0;
        stitch_gn_thread_sums(pro, row * seg, begin, end, t, l.threads, vec, &s, &q);
        sum[row] += s;
        sumsq[row] += q;
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) printf("%.17g %.17g\n", sum[r], sumsq[r]);
  return 0;
}
"""


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_emulator(
        tmp_path_factory.mktemp("gn_emulation"), EMULATION.replace("@SWEEP@", common_section("sweep"))
    )


@pytest.mark.parametrize(
    ("rows", "seg", "sms"),
    [
        (32, 65536, 132),  # InstanceNorm-like: few long slabs, each split over several blocks
        (128, 524288, 132),  # KernelBench's GroupNorm: 128 slabs of 2 MiB, four parts each
        (4, 100000, 132),  # very few slabs: many parts each
        (20000, 16, 132),  # GEMM + GroupNorm: many 16-float slabs, one warp a block, the grid strides
        (3000, 512, 8),  # 512-float slabs: four warps a block
        (1000, 30, 132),  # slabs that are not whole float4s: the scalar path
        (7, 1, 4),  # one element a slab
    ],
)
def test_every_element_of_every_slab_is_summed_once(emulator: Path, rows: int, seg: int, sms: int) -> None:
    proc = subprocess.run(
        [str(emulator), str(rows), str(seg), str(sms)], check=True, capture_output=True, text=True
    )
    threads, splits, chunk, grid = (int(v) for v in proc.stderr.split())
    got = torch.tensor(
        [[float(v) for v in line.split()] for line in proc.stdout.splitlines()], dtype=torch.float64
    )
    i = torch.arange(rows * seg, dtype=torch.int64)
    x = ((i * 7919) % 211).to(torch.float64) * 0.25 - 20.0
    expected = torch.stack([x.view(rows, seg).sum(1), (x * x).view(rows, seg).sum(1)], 1)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-9)
    assert threads % 32 == 0 and 32 <= threads <= 512
    assert threads <= max(32, -(-seg // 4) + 31), "a short slab keeps no idle warp"
    assert splits * chunk >= seg and chunk % 4 == 0 and (splits == 1 or chunk * (splits - 1) < seg)
    full = sms * min(32, 2048 // threads)
    assert 1 <= grid <= full and grid <= rows * splits
    if rows < full:  # the parts fit one wave: no partial second wave with most SMs idle
        assert rows * splits <= full
