"""The batched strided sweep of the row kernels (templates/common.cuh: stitch_sweep) run on the CPU.

The softmax, log-softmax, layer-norm and axis kernels read their rows through it, so that several
loads per thread are in flight before the first is used. The section compiles alone as plain C++:
every visit must happen once, in the plain loop's order, with its values stored to `saved` first
when asked; stitch_sweep_batches hands complete batches over whole; stitch_online_group folds a
batch into a running (max, sum of exp) as the value-by-value update would.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.host_emulation import build_emulator, common_section

MAIN = r"""
#include <cmath>
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

template <int U, int W>
static void run_batches(const Rows& rows, float* saved, int64_t base, int64_t first, int64_t hi, int64_t step) {
  stitch_sweep_batches<U, W>(
      rows, saved, base, first, hi, step,
      [&](const float (&t)[U][W], int64_t c) {
        for (int u = 0; u < U; ++u) {
          printf("%lld", (long long)(c + u * step));
          for (int k = 0; k < W; ++k) printf(" %g", t[u][k]);
          printf(" whole\n");
        }
      },
      [&](const float* t, int64_t at) {
        printf("%lld", (long long)at);
        for (int k = 0; k < W; ++k) printf(" %g", t[k]);
        printf(" one\n");
      });
}

@LSE@
static int online(int argc, char** argv) {  // args: online N values...: "m s" by value, then by batches
  const int n = argc - 3;
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = strtof(argv[3 + i], nullptr);
  float m = -INFINITY, s = 0.f;
  for (float x : v) stitch_lse_step(m, s, x);
  printf("%.9g %.9g\n", m, s);
  m = -INFINITY, s = 0.f;
  int i = 0;
  for (; i + 4 <= n; i += 4) stitch_online_group<4>(m, s, v.data() + i, StitchLseStep());
  for (; i < n; ++i) stitch_online_group<1>(m, s, v.data() + i, StitchLseStep());
  printf("%.9g %.9g\n", m, s);
  return 0;
}

// args: U W base first hi step save [batches]
int main(int argc, char** argv) {
  if (argv[1][0] == 'o') return online(argc, argv);
  const int u = atoi(argv[1]), w = atoi(argv[2]), save = atoi(argv[7]);
  const bool batches = argc > 8;
  const int64_t base = atoll(argv[3]), first = atoll(argv[4]), hi = atoll(argv[5]), step = atoll(argv[6]);
  std::vector<float> x(base + hi + 8), s(x.size(), -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (float)i;
  float* saved = save ? s.data() : nullptr;
  const Rows rows{x.data()};
  if (batches && u == 4 && w == 4) run_batches<4, 4>(rows, saved, base, first, hi, step);
  if (batches && u == 2 && w == 1) run_batches<2, 1>(rows, saved, base, first, hi, step);
  if (!batches && u == 4 && w == 4) run<4, 4>(rows, saved, base, first, hi, step);
  if (!batches && u == 4 && w == 1) run<4, 1>(rows, saved, base, first, hi, step);
  if (!batches && u == 2 && w == 4) run<2, 4>(rows, saved, base, first, hi, step);
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] >= 0.0f) fprintf(stderr, "%zu\n", i);
  return 0;
}
"""


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_emulator(
        tmp_path_factory.mktemp("sweep"),
        MAIN.replace("@SWEEP@", common_section("sweep")).replace(
            "@LSE@", common_section("lse step", "axis.cuh")
        ),
    )


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


@pytest.mark.parametrize(
    ("u", "w", "base", "first", "hi", "step"),
    [
        (4, 4, 64, 8, 1000, 32),  # two whole batches, then a partial one
        (2, 1, 5, 1, 41, 10),  # two whole batches exactly
        (4, 4, 0, 0, 12, 32),  # one visit: no whole batch
    ],
)
def test_batches_go_whole_when_complete_and_visit_by_visit_at_the_end(
    emulator: Path, u: int, w: int, base: int, first: int, hi: int, step: int
) -> None:
    args = [u, w, base, first, hi, step, 1, "batches"]
    proc = subprocess.run([str(emulator), *map(str, args)], check=True, capture_output=True, text=True)
    visits = [line.split() for line in proc.stdout.splitlines()]
    expected = list(range(first, hi, step))
    assert [int(v[0]) for v in visits] == expected
    whole = len(expected) // u * u  # visits in complete batches
    assert [v[-1] for v in visits] == ["whole"] * whole + ["one"] * (len(expected) - whole)
    for v in visits:
        at = int(v[0])
        assert [float(t) for t in v[1:-1]] == [float(base + at + k) for k in range(w)]
    stored = sorted(int(i) for i in proc.stderr.split())
    assert stored == sorted(base + at + k for at in expected for k in range(w))


@pytest.mark.parametrize(
    "values",
    [
        [0.5, -3.0, 7.25, 1.0, 2.0, 9.5, -1.0, 0.0, 4.0],  # the max rises in a later batch
        ["-inf"] * 6,  # nothing to add
        ["-inf", "-inf", 1.0, "-inf", 2.0],  # -inf before and after the first number
        [1.0, "inf", 2.0, 3.0, 4.0, 5.0],  # +inf: the sum turns NaN, the max stays +inf
        [1.0, "inf", 2.0, 3.0, 4.0, "nan", 0.0, 1.0],  # +inf and then NaN: the max is NaN
        [2.0, 1.0, 0.0, "nan", 3.0],  # NaN sticks
    ],
)
def test_a_batch_folds_into_max_and_sum_as_value_by_value(emulator: Path, values: list[float | str]) -> None:
    proc = subprocess.run(
        [str(emulator), "online", "-", *map(str, values)], check=True, capture_output=True, text=True
    )
    by_value, by_batch = ([float(x) for x in line.split()] for line in proc.stdout.splitlines())
    assert str(by_value[0]) == str(by_batch[0])  # the same max, NaN and infinities included
    if by_value[1] == by_value[1]:
        assert abs(by_batch[1] - by_value[1]) <= 1e-6 * abs(by_value[1])
    else:
        assert by_batch[1] != by_batch[1]
