"""The batched strided sweep of the row kernels (templates/common.cuh: stitch_sweep) run on the CPU.

The softmax, log-softmax, layer-norm and axis kernels read their rows through it, so that several
loads per thread are in flight before the first is used. The section compiles alone as plain C++:
every visit must happen once, in the plain loop's order, with its values stored to `saved` first
when asked.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.host_emulation import build_emulator, common_section

MAIN = r"""
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define __device__
#define __forceinline__ inline
static void stitch_st4(float* p, const float v[4]) { for (int k = 0; k < 4; ++k) p[k] = v[k]; }
struct Rows {
  const float* x;
  float load(int64_t e) const { return x[e]; }
  void load4(int64_t e, float* v) const { for (int k = 0; k < 4; ++k) v[k] = x[e + k]; }
};
@SWEEP@
template <int U, int W>
static void run(const Rows& rows, float* saved, int64_t base, int64_t first, int64_t hi, int64_t step) {
  stitch_sweep<U, W>(rows, saved, base, first, hi, step, [&](const float* t, int64_t at) {
    printf("%lld", (long long)at);
    for (int k = 0; k < W; ++k) printf(" %g", t[k]);
    printf("\n");
  });
}

// args: U W base first hi step save
int main(int argc, char** argv) {
  const int u = atoi(argv[1]), w = atoi(argv[2]), save = atoi(argv[7]);
  const int64_t base = atoll(argv[3]), first = atoll(argv[4]), hi = atoll(argv[5]), step = atoll(argv[6]);
  std::vector<float> x(base + hi + 8), s(x.size(), -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (float)i;
  float* saved = save ? s.data() : nullptr;
  const Rows rows{x.data()};
  if (u == 4 && w == 4) run<4, 4>(rows, saved, base, first, hi, step);
  if (u == 4 && w == 1) run<4, 1>(rows, saved, base, first, hi, step);
  if (u == 2 && w == 4) run<2, 4>(rows, saved, base, first, hi, step);
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] >= 0.0f) fprintf(stderr, "%zu\n", i);
  return 0;
}
"""


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_emulator(tmp_path_factory.mktemp("sweep"), MAIN.replace("@SWEEP@", common_section("sweep")))


@pytest.mark.parametrize(
    ("u", "w", "base", "first", "hi", "step", "save"),
    [
        (4, 4, 64, 8, 1000, 32, 1),  # float4 visits of one thread, the last batch partly past the end
        (4, 1, 0, 3, 70, 16, 0),  # scalar visits, no saved copy
        (2, 4, 12, 0, 8, 64, 1),  # fewer visits than one batch
        (4, 1, 5, 9, 9, 4, 1),  # no visit at all
    ],
)
def test_every_visit_happens_once_in_order_and_is_saved_first(
    emulator: Path, u: int, w: int, base: int, first: int, hi: int, step: int, save: int
) -> None:
    args = [u, w, base, first, hi, step, save]
    proc = subprocess.run([str(emulator), *map(str, args)], check=True, capture_output=True, text=True)
    visits = [line.split() for line in proc.stdout.splitlines()]
    expected = list(range(first, hi, step))
    assert [int(v[0]) for v in visits] == expected
    for v in visits:  # the values of the row at `base`, element at .. at + w - 1
        at = int(v[0])
        assert [float(t) for t in v[1:]] == [float(base + at + k) for k in range(w)]
    stored = sorted(int(i) for i in proc.stderr.split())
    assert stored == (sorted(base + at + k for at in expected for k in range(w)) if save else [])
