"""The batch-norm statistics' slicing (templates/batchnorm.cuh) run on the CPU.

The per-thread sums and the slice planner compile as plain C++ (STITCH_HOST_EMULATION): every
(channel, slice, thread) share is summed here as the kernel's blocks would, so the plane walk, the
float4 path and the ranges' cover are checked against float64 PyTorch without a GPU. The block
reduction itself is the shared one every row kernel uses.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from support.host_emulation import build_emulator

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
struct float4 { float x, y, z, w; };
#define STITCH_HOST_EMULATION
#include "batchnorm.cuh"

int main(int argc, char** argv) {
  const int64_t N = atoll(argv[1]), C = atoll(argv[2]), HW = atoll(argv[3]);
  const bool vec = atoi(argv[4]) != 0;
  const int threads = atoi(argv[5]), sms = atoi(argv[6]);
  std::vector<float> x(N * C * HW);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (float)((int64_t)(i * 7919) % 211) * 0.25f - 20.0f;
  int64_t span = 0;
  const int64_t slices = stitch_bn_slices(N, C, HW, sms, vec, &span);
  fprintf(stderr, "%lld %lld\n", (long long)slices, (long long)span);
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0.0, sumsq = 0.0;
    for (int64_t s = 0; s < slices; ++s) {
      const int64_t lo = s * span, hi = lo + span < N * HW ? lo + span : N * HW;
      for (int t = 0; t < threads; ++t) {
        double a = 0.0, b = 0.0;
        stitch_bn_thread_sums(x.data(), C, HW, c, lo, hi, t, threads, vec, &a, &b);
        sum += a;
        sumsq += b;
      }
    }
    printf("%.17g %.17g\n", sum, sumsq);
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_emulator(tmp_path_factory.mktemp("bn_emulation"), EMULATION)


@pytest.mark.parametrize(
    ("n", "c", "hw", "vec", "threads", "sms"),
    [
        (16, 3, 3136, True, 256, 132),  # few channels: many slices, each crossing planes
        (16, 64, 3136, True, 512, 132),
        (4, 5, 27, False, 64, 132),  # odd planes: the scalar path
        (2, 300, 8, True, 32, 8),  # more channels than blocks wanted: one slice each
        (1, 2, 100000, True, 128, 132),  # one long plane cut into slices
        (7, 1, 1, False, 32, 132),  # BatchNorm1d over (N, C): one element per plane
        (4096, 3, 1, False, 128, 132),  # ... with a long batch, cut into slices
        (300, 2, 12, True, 64, 132),  # short planes of whole float4s: still the flat walk
        (40, 2, 32, True, 32, 4),  # the shortest planes the plane walk takes
    ],
)
def test_every_element_is_summed_once(
    emulator: Path, n: int, c: int, hw: int, vec: bool, threads: int, sms: int
) -> None:
    proc = subprocess.run(
        [str(emulator), str(n), str(c), str(hw), str(int(vec)), str(threads), str(sms)],
        check=True,
        capture_output=True,
        text=True,
    )
    slices, span = map(int, proc.stderr.split())
    total = n * hw
    assert (slices - 1) * span < total <= slices * span  # the ranges cover the channel, none empty
    if vec:
        assert span % 4 == 0
    assert slices == 1 or span >= 2048 or span >= total // slices
    got = torch.tensor(
        [[float(v) for v in line.split()] for line in proc.stdout.splitlines()], dtype=torch.float64
    )
    i = torch.arange(n * c * hw, dtype=torch.int64)
    x = (((i * 7919) % 211).to(torch.float32) * 0.25 - 20.0).to(torch.float64).view(n, c, hw)
    want = torch.stack([x.sum(dim=(0, 2)), (x * x).sum(dim=(0, 2))], dim=1)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-9)
