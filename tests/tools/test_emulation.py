"""The CPU emulation of generated programs (tools/emulation): the source rewrite, the emulated runtime's
semantics (barriers, shuffles, launch checks), and every fixture program (our kernels, cuBLASLt and
cuDNN calls included) against its reference."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
import torch
from support.emulated_programs import emulated_outputs, program_source

from tools.emulation.program import build_module, load_program, rewrite_launches

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "problems"


@pytest.fixture(autouse=True)
def _no_algorithm_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The convolution library appends its algorithm choices to a file; emulated ones stay out of it."""
    monkeypatch.setenv("STITCHCUDA_CUDNN_CACHE", "off")


def test_launches_and_dynamic_shared_memory_are_rewritten_for_gxx() -> None:
    source = (
        "extern __shared__ float tile[];\n"
        "k<A, B<C>><<<dim3(g, 2), 256>>>(x, f(y, z));\n"
        "plain<<<stitch_grid(n, 256, 0), threads, smem, stream>>>(p);\n"
        "none<<<1, 32>>>();\n"
    )
    out = rewrite_launches(source)
    assert "<<<" not in out and "extern __shared__" not in out
    assert "float* tile = reinterpret_cast<float*>(stitch_emu::dynamic_smem());" in out
    assert (
        "stitch_emu::launch(&k<A, B<C>>, dim3(dim3(g, 2)), dim3(256), (size_t)(0), (cudaStream_t)(nullptr), x, f(y, z));"
        in out
    )
    assert "stitch_emu::launch(&plain, dim3(stitch_grid(n, 256, 0)), dim3(threads), (size_t)(smem), " in out
    assert "stitch_emu::launch(&none, dim3(1), dim3(32), (size_t)(0), (cudaStream_t)(nullptr));" in out


SEMANTICS_CUDA = r"""
#include <cuda_runtime.h>
#include <stdint.h>

// Tree sum in shared memory: one result per block.
__global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float part[128];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  part[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

// Inclusive scan within each warp (shuffle up), and the warp total in every lane (butterfly).
__global__ void warp_ops(const float* x, float* scan, float* total) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x & 31;
  float v = x[i];
  for (int d = 1; d < 32; d <<= 1) {
    const float up = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += up;
  }
  scan[i] = v;
  float t = x[i];
  for (int m = 16; m > 0; m >>= 1) t += __shfl_xor_sync(0xffffffffu, t, m);
  total[i] = t;
}

// A by-value parameter each thread changes: every thread must see its own copy.
__global__ void own_params(int n, int* out) {
  n += threadIdx.x;
  out[threadIdx.x] = n;
}

// Half a warp shuffles while the other half waits at __syncthreads: neither barrier can complete.
__global__ void divergent(float* x) {
  if (threadIdx.x < 16) {
    x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, x[threadIdx.x], 1);
  } else {
    __syncthreads();
  }
}

__global__ void with_dynamic(float* x) {
  extern __shared__ float cache[];
  cache[threadIdx.x] = x[threadIdx.x] * 2.f;
  __syncthreads();
  x[threadIdx.x] = cache[blockDim.x - 1 - threadIdx.x];
}

extern "C" int run(int which, const float* x, float* a, float* b, int* c, int n) {
  switch (which) {
    case 0: block_sum<<<(n + 127) / 128, 128>>>(x, a, n); break;
    case 1: warp_ops<<<n / 64, 64>>>(x, a, b); break;
    case 2: own_params<<<1, 64>>>(n, c); break;
    case 3: divergent<<<1, 32>>>(a); break;
    case 4: block_sum<<<1, 2048>>>(x, a, n); break;
    case 5: with_dynamic<<<1, 64, 64 * 1024>>>(a); break;
    case 6:
      if (cudaFuncSetAttribute(with_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) != cudaSuccess)
        return -1;
      with_dynamic<<<1, 64, 64 * 1024>>>(a);
      break;
  }
  return (int)cudaGetLastError();
}
"""

SEMANTICS_CPP = r"""
#include <pybind11/pybind11.h>
#include <cstdint>
extern "C" int run(int which, const float* x, float* a, float* b, int* c, int n);
static int py_run(int which, std::uintptr_t x, std::uintptr_t a, std::uintptr_t b, std::uintptr_t c, int64_t n) {
  return run(which, reinterpret_cast<const float*>(x), reinterpret_cast<float*>(a), reinterpret_cast<float*>(b),
             reinterpret_cast<int*>(c), (int)n);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &py_run); }
"""


@pytest.mark.slow
def test_the_emulated_runtime_runs_barriers_and_shuffles_and_checks_launches() -> None:
    ext = build_module(SEMANTICS_CUDA, SEMANTICS_CPP)
    n = 300
    x = torch.arange(n, dtype=torch.float32) % 7 - 3
    a, b = torch.zeros(n), torch.zeros(n)
    c = torch.zeros(64, dtype=torch.int32)
    ptrs = (x.data_ptr(), a.data_ptr(), b.data_ptr(), c.data_ptr())

    assert ext.run(0, *ptrs, n) == 0
    sums = torch.nn.functional.pad(x, (0, 84)).view(3, 128).sum(1)
    assert torch.equal(a[:3], sums)

    assert ext.run(1, *ptrs, 256) == 0
    warps = x[:256].view(8, 32)
    assert torch.equal(a[:256].view(8, 32), warps.cumsum(1))
    assert torch.equal(b[:256].view(8, 32), warps.sum(1, keepdim=True).expand(8, 32))

    assert ext.run(2, *ptrs, 5) == 0
    assert torch.equal(c, torch.arange(5, 69, dtype=torch.int32))

    launch_failure, invalid_configuration, invalid_value = 719, 9, 1
    assert ext.run(3, *ptrs, n) == launch_failure  # the barrier deadlock
    assert ext.run(4, *ptrs, n) == invalid_configuration  # 2048 threads in a block
    assert ext.run(5, *ptrs, n) == invalid_value  # 64 KiB of dynamic shared memory without the opt-in
    a[:64] = torch.arange(64, dtype=torch.float32)
    assert ext.run(6, *ptrs, n) == 0  # ... and with it
    assert torch.equal(a[:64], torch.arange(63, -1, -1, dtype=torch.float32) * 2)
    assert ext.run(0, *ptrs, n) == 0  # an error does not stick past cudaGetLastError


VOTES_CUDA = r"""
// Each of a block's threads votes five times in a row: counts, any, all (a fast thread's next vote
// must not land in the count its neighbours are still reading).
__global__ void votes(int* out, int rounds) {
  const int t = (int)threadIdx.x;
  for (int r = 0; r < rounds; ++r) {
    const int count = __syncthreads_count(t % (r + 2) == 0);
    const int any = __syncthreads_or(t == 7 * r);
    const int all = __syncthreads_and(t < 90 + r);
    out[(blockIdx.x * rounds + r) * 3 + 0] = count;
    out[(blockIdx.x * rounds + r) * 3 + 1] = any;
    out[(blockIdx.x * rounds + r) * 3 + 2] = all;
  }
}
extern "C" int run_votes(int* out, int blocks, int threads, int rounds) {
  votes<<<blocks, threads>>>(out, rounds);
  return (int)cudaGetLastError();
}
"""
VOTES_CPP = r"""
#include <pybind11/pybind11.h>
#include <cstdint>
extern "C" int run_votes(int* out, int blocks, int threads, int rounds);
static int64_t py_votes(std::uintptr_t out, int64_t blocks, int64_t threads, int64_t rounds) {
  return run_votes(reinterpret_cast<int*>(out), (int)blocks, (int)threads, (int)rounds);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("votes", &py_votes); }
"""


@pytest.mark.slow
def test_block_votes_count_every_thread_once_per_barrier() -> None:
    """__syncthreads_count / _or / _and (the attention kernel's tile skip) over 100 threads, 12 rounds."""
    ext = build_module(VOTES_CUDA, VOTES_CPP)
    blocks, threads, rounds = 2, 100, 12
    out = torch.zeros(blocks, rounds, 3, dtype=torch.int32)
    assert ext.votes(out.data_ptr(), blocks, threads, rounds) == 0
    t = torch.arange(threads)
    for r in range(rounds):
        want = [int((t % (r + 2) == 0).sum()), int(7 * r < threads), int(90 + r >= threads)]
        assert out[:, r].tolist() == [want] * blocks, r


FIXTURE_FILES = sorted(FIXTURES.rglob("*.py"))
SPLIT_FIXTURES = [p for p in FIXTURE_FILES if "Families" in p.stem or "Decomposed" in p.stem]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "levels"),
    [(p, None) for p in FIXTURE_FILES] + [(p, 1) for p in SPLIT_FIXTURES],
    ids=[p.stem for p in FIXTURE_FILES] + [f"{p.stem}-split" for p in SPLIT_FIXTURES],
)
def test_fixture_programs_compute_the_reference_in_the_emulation(problem: Path, levels: int | None) -> None:
    expected, got = emulated_outputs(problem, program_source(problem, levels))
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert g.shape == e.shape and g.dtype == e.dtype, f"output {i}"
        assert torch.allclose(g, e, atol=1e-4, rtol=1e-4, equal_nan=True), (
            f"output {i}: max abs err {float((g - e).abs().nan_to_num(0.0).max()):.3g}"
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fixture", "knob", "value"),
    [
        # stitch_pool_rowvec_kernel: the pool families' fixed-window pools, prologues and epilogues
        ("level2/11_Pool_Families.py", "outs", 4),
        ("level2/11_Pool_Families.py", "outs", 2),
        # stitch_ew_vecu_kernel: two chunks' loads before their stores, broadcast operands included
        ("level2/6_Elementwise_Chain.py", "unroll", 2),
        ("level1/40_Activations.py", "unroll", 2),
    ],
)
def test_launch_knobs_off_their_default_keep_the_reference(fixture: str, knob: str, value: int) -> None:
    """A launch knob the tuner may set (here off its default of 1) runs another kernel through the same
    launcher; it still gives PyTorch's results."""
    problem = FIXTURES / fixture
    source = program_source(problem)
    assert f"'{knob}': 1" in source  # the program's groups carry the knob
    expected, got = emulated_outputs(problem, source.replace(f"'{knob}': 1", f"'{knob}': {value}"))
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.allclose(g, e, atol=1e-4, rtol=1e-4), f"output {i}: {float((g - e).abs().max()):.3g}"


@pytest.mark.slow
def test_a_kernel_that_forgets_its_block_offset_is_caught() -> None:
    """The emulation runs the index math as written: a grid-stride loop that starts every block at
    element 0 computes some elements many times and others never, which the comparison sees."""
    problem = FIXTURES / "level1" / "1_ReLU.py"
    source = program_source(problem)
    loop = (
        "for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) f.vec4(i * 4);"
    )
    broken = source.replace(loop, "for (int64_t i = threadIdx.x; i < n4; i += stride) f.vec4(i * 4);")
    # NaN where nothing is written (fresh memory might hold an earlier run's right answer)
    broken = broken.replace("o0 = torch.empty(shape,", 'o0 = torch.full(shape, float("nan"),')
    assert broken.count("i = threadIdx.x; i < n4") == 1 and 'float("nan")' in broken
    expected, got = emulated_outputs(problem, broken)
    assert not torch.allclose(got[0], expected[0])


ARG_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Arg-reductions through every axis kernel: short rows (a warp each), long rows (a block each),
    few long rows (split over blocks), columns (scalar and float4 tiles)."""

    def forward(self, short, long, few, cols, cols4):
        values, where = torch.min(long, dim=-1)
        return (torch.argmax(short, dim=-1), torch.argmin(short, dim=-1), values, where,
                torch.argmax(few, dim=-1), torch.argmin(cols, dim=1), torch.argmax(cols4, dim=1))


def get_inputs():
    return [torch.rand(64, 96), torch.rand(9, 4200), torch.rand(2, 9000), torch.rand(3, 40, 6),
            torch.rand(2, 300, 8)]


def get_init_inputs():
    return []
'''


def _with_ties_and_specials(t: torch.Tensor) -> torch.Tensor:
    """Few distinct values (many ties), then rows of NaNs, of +inf, of -inf and of both infinities."""
    t = (t * 4).floor()
    rows = t.view(-1, t.shape[-1])
    n = rows.shape[0]
    rows[0, 5::7] = float("nan")
    rows[1 % n] = float("inf")
    rows[2 % n] = float("-inf")
    if n > 3:
        rows[3, ::2] = float("inf")
        rows[3, 1::2] = float("-inf")
        rows[3, -1] = float("nan")
    return t


@pytest.mark.slow
def test_arg_reductions_break_ties_and_treat_nan_and_infinities_as_pytorch(tmp_path: Path) -> None:
    """The kernels' per-lane states take the first of equal values and a NaN over any number; the
    merges across lanes, warps, blocks and split parts must keep PyTorch's answer exactly."""
    problem = tmp_path / "arg_ties.py"
    problem.write_text(ARG_PROBLEM)
    namespace = load_program(program_source(problem))
    reference: dict[str, Any] = runpy.run_path(str(problem))
    torch.manual_seed(3)
    inputs = [_with_ties_and_specials(t) for t in reference["get_inputs"]()]
    expected = reference["Model"]()(*inputs)
    got = namespace["ModelNew"]()(*inputs)
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.equal(torch.isnan(g), torch.isnan(e)) and torch.equal(g.nan_to_num(), e.nan_to_num()), (
            f"output {i}: {int((g.nan_to_num() != e.nan_to_num()).sum())} differ"
        )


TRACE_SCRIPT = """
import runpy, sys
import torch
from tools.emulation.program import load_program
problem = runpy.run_path(sys.argv[1])
namespace = load_program(open(sys.argv[2]).read())
torch.backends.cudnn.allow_tf32 = False
model = namespace["ModelNew"](*problem["get_init_inputs"]())
inputs = problem["get_inputs"]()
for _ in range(3):
    model(*inputs)
"""


@pytest.mark.slow
def test_the_conv_library_traces_its_host_time_per_phase_and_algorithm(tmp_path: Path) -> None:
    """STITCHCUDA_CONV_HOST_TRACE=1: at exit the convolution library prints the median host time of a
    call's setup, plan lookup and library run, and how many calls ran each algorithm id."""
    import os
    import re
    import subprocess
    import sys

    problem = FIXTURES / "level1" / "9_Conv2d.py"
    program = tmp_path / "program.py"
    program.write_text(program_source(problem))
    env = dict(os.environ, STITCHCUDA_CONV_HOST_TRACE="1", STITCHCUDA_CUDNN_CACHE="off")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", TRACE_SCRIPT, str(problem), str(program)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stderr.splitlines() if x.startswith("STITCH_CONV_HOST_TRACE"))
    match = re.search(
        r"calls (\d+), median us: setup ([\d.]+), plans ([\d.]+), run ([\d.]+); algos((?: -?\d+x\d+)+)", line
    )
    assert match is not None, line
    calls = int(match.group(1))
    assert calls == 3 and float(match.group(4)) > 0.0
    assert sum(int(a.split("x")[1]) for a in match.group(5).split()) == calls
    # The first call searched: one line per candidate, and the algorithm the calls ran was one of them.
    searched = re.findall(
        r"STITCH_CONV_SEARCH algo (-?\d+) fused (\d): device (-?[\d.]+) us, host ([\d.]+)", done.stderr
    )
    assert searched, done.stderr[-2000:]
    ran = {a.split("x")[0] for a in match.group(5).split()}
    assert ran <= {algo for algo, _, device, _ in searched if float(device) >= 0.0}


GN_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(4, 16)
        self.inorm = nn.InstanceNorm2d(8)
        nn.init.normal_(self.gn.weight)
        nn.init.normal_(self.gn.bias)

    def forward(self, a, b, c, d, e):
        both = self.gn(torch.sigmoid(e))  # an output and the epilogue's input: statistics + elementwise
        return (torch.relu(self.gn(a)) * 2.0, self.inorm(b), self.gn(c), self.gn(torch.tanh(d) * 2.0), both,
                both * 3.0)


def get_inputs():
    return [torch.randn(4, 16, 10, 12) * 3 + 1, torch.rand(3, 8, 256, 260), torch.randn(2, 16, 5, 7),
            torch.randn(3, 16, 6, 8), torch.randn(2, 16, 4, 6)]


def get_init_inputs():
    return []
"""


class _Recorder:
    """The program's extension, with the norm launchers' answers recorded (1: one pass, 2: two)."""

    def __init__(self, ext: Any) -> None:
        self.ext, self.answers = ext, []

    def __getattr__(self, name: str) -> Any:
        function = getattr(self.ext, name)
        if not name.startswith("gn_norm"):
            return function

        def call(*args: Any) -> Any:
            self.answers.append(function(*args))
            return self.answers[-1]

        return call


@pytest.mark.slow
@pytest.mark.parametrize("onepass", [1, 0])
def test_group_and_instance_norm_in_one_pass_match_the_reference(tmp_path: Path, onepass: int) -> None:
    """The one-pass kernel (a block per slab, the head in shared memory, the tail read again) and the
    statistics + apply kernels give PyTorch's result: vector and scalar slabs, an epilogue, a prologue,
    a slab longer than the shared-memory head; with the knob at 0 every norm takes two passes. A norm
    that is an output as well as its epilogue's input takes the statistics + elementwise kernels."""
    problem = tmp_path / "norms.py"
    problem.write_text(GN_PROBLEM)
    source = program_source(problem)
    assert source.count("_ext.gn_moments_") == 1  # the sigmoid's group: its own launcher, for the prologue
    namespace = load_program(source)
    for group in namespace["STITCH_LAUNCH"]:
        if "onepass" in namespace["STITCH_LAUNCH"][group]:
            namespace["stitch_set_launch"](group, "onepass", onepass)
    recorder = _Recorder(namespace["_ext"])
    namespace["_ext"] = recorder
    reference: dict[str, Any] = runpy.run_path(str(problem))
    torch.manual_seed(0)
    model = reference["Model"]()
    torch.manual_seed(0)
    ours = namespace["ModelNew"]()
    torch.manual_seed(1)
    inputs = reference["get_inputs"]()
    with torch.no_grad():
        expected, got = model(*inputs), ours(*inputs)
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.allclose(g, e, atol=1e-5, rtol=1e-5), f"output {i}: {float((g - e).abs().max()):.3g}"
    assert recorder.answers == ([1, 1, 1, 1] if onepass else [2, 2, 2, 2])


LONG_ROWS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.softmax(a, dim=-1), torch.log_softmax(b, dim=-1)


def get_inputs():
    return [torch.randn(5, 60000) * 3, torch.randn(4, 57001) * 3]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_long_softmax_rows_read_their_head_from_shared_memory_and_their_tail_again(tmp_path: Path) -> None:
    """Rows longer than the opt-in shared-memory head (about 55,700 floats), at least one per emulated
    SM: softmax's long-row kernel, float4 and scalar rows, matches PyTorch."""
    problem = tmp_path / "long_rows.py"
    problem.write_text(LONG_ROWS)
    expected, got = emulated_outputs(problem, program_source(problem))
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.allclose(g, e, atol=1e-6, rtol=1e-5), f"output {i}: {float((g - e).abs().max()):.3g}"


ONLINE_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, short, long, few, odd, block, split):
        return (torch.logsumexp(short, dim=-1), torch.logsumexp(long, dim=-1), torch.logsumexp(few, dim=-1),
                torch.logsumexp(odd, dim=-1), torch.softmax(block, dim=-1), torch.log_softmax(split, dim=-1))


def get_inputs():
    return [torch.randn(64, 96) * 4, torch.randn(9, 4200) * 4, torch.randn(4, 9000) * 4,
            torch.randn(6, 4097) * 4, torch.randn(7, 3001) * 4, torch.randn(2, 20000) * 4]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_online_max_and_sum_in_batches_keep_pytorch_answers_and_special_values(tmp_path: Path) -> None:
    """logsumexp and softmax fold each batch of loads with one max and independent exponentials
    (stitch_online_group), falling back to the value-by-value update where a NaN or +inf appears: warp,
    block, split and scalar rows match PyTorch on finite rows, and logsumexp keeps its special values
    (NaN, +inf, all -inf, +inf before a NaN) exactly."""
    problem = tmp_path / "online.py"
    problem.write_text(ONLINE_PROBLEM)
    namespace = load_program(program_source(problem))
    reference: dict[str, Any] = runpy.run_path(str(problem))
    torch.manual_seed(5)
    inputs = reference["get_inputs"]()
    for t in inputs[:4]:  # special rows for logsumexp: a NaN, +inf, all -inf, some -inf, +inf then NaN
        t[0, 7] = float("nan")
        t[1, -3] = float("inf")
        t[2] = float("-inf")
        t[3, ::5] = float("-inf")
        t[4 % t.shape[0], 1], t[4 % t.shape[0], -1] = float("inf"), float("nan")
    for t in inputs[4:]:  # and for softmax, a NaN row and some -inf
        t[0, -2] = float("nan")
        t[1, ::3] = float("-inf")
    expected = reference["Model"]()(*inputs)
    got = namespace["ModelNew"]()(*inputs)
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.equal(torch.isnan(g), torch.isnan(e)), f"output {i}: NaNs differ"
        assert torch.allclose(g, e, atol=1e-5, rtol=1e-5, equal_nan=True), (
            f"output {i}: max abs err {float((g - e).abs().nan_to_num(0.0).max()):.3g}"
        )


WIDE_POOLS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b, c):
        return (nn.functional.adaptive_avg_pool2d(a, (7, 7)), nn.functional.adaptive_max_pool2d(b, (2, 1)),
                nn.functional.adaptive_avg_pool3d(c, (2, 3, 2)))


def get_inputs():
    return [torch.randn(2, 3, 224, 224), torch.randn(2, 3, 9, 70), torch.randn(1, 2, 9, 13, 11)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_wide_adaptive_windows_walk_their_taps_without_dividing(tmp_path: Path) -> None:
    """A warp per output, each lane stepping 32 taps at a time with a carry: windows exactly a warp wide
    (224 -> 7), wider than a warp (70 -> 1) and over depth (3-D) give PyTorch's result."""
    problem = tmp_path / "wide_pools.py"
    problem.write_text(WIDE_POOLS)
    expected, got = emulated_outputs(problem, program_source(problem))
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.allclose(g, e, atol=1e-5, rtol=1e-5), f"output {i}: {float((g - e).abs().max()):.3g}"
