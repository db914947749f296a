"""The cached load_inline: keys, flags, compiler-error parsing, and real g++ builds (one succeeds)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tools import build

REPO = Path(__file__).resolve().parents[2]
AFFINE = REPO / "tests" / "candidates" / "worker" / "affine_ok.py"


def affine_cpp() -> str:
    """CPP_SRC of the affine test candidate (a pybind11-only binding: the cheapest real build)."""
    for node in ast.parse(AFFINE.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CPP_SRC":
            return ast.literal_eval(node.value)
    raise AssertionError("affine_ok.py has no CPP_SRC")


# ----------------------------------------------------------------------------------------------
# Pure functions
# ----------------------------------------------------------------------------------------------

NVCC_OUTPUT = """\
[1/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -DTORCH_EXTENSION_NAME=x -c /cache/.tmp-ab/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c /cache/.tmp-ab/cuda.cu -o cuda.cuda.o
cuda_sources(12): error: identifier "blockIdx_x" is undefined
      int i = blockIdx_x;
              ^
cuda_sources(20): error: too few arguments in function call
2 errors detected in the compilation of "/cache/.tmp-ab/cuda.cu".
ninja: build stopped: subcommand failed.
"""

GXX_OUTPUT = """\
Error building extension 'affine_0123': [1/2] c++ -MMD -MF main.o.d -c /cache/.tmp-ab/main.cpp -o main.o
FAILED: main.o
c++ -MMD -MF main.o.d -c /cache/.tmp-ab/main.cpp -o main.o
In file included from /cache/.tmp-ab/main.cpp:1:
cpp_sources: In function 'void affine(uintptr_t)':
cpp_sources:8:5: error: 'yq' was not declared in this scope; did you mean 'yp'?
    8 |     yq[i] = 1;
      |     ^~
compilation terminated.
ninja: build stopped: subcommand failed.
"""

LD_OUTPUT = """\
[2/2] c++ main.o cuda.cuda.o -shared -o x.so
FAILED: x.so
/usr/bin/ld: main.o: in function `relu(unsigned long)': main.cpp:(.text+0x1c): undefined reference to `stitch_relu'
collect2: error: ld returned 1 exit status
"""


def test_compiler_errors_keep_file_and_line_and_drop_noise() -> None:
    errors = build.parse_compiler_errors(NVCC_OUTPUT, ["/cache/.tmp-ab"])
    assert errors == [
        'cuda_sources(12): error: identifier "blockIdx_x" is undefined',
        "cuda_sources(20): error: too few arguments in function call",
    ]
    gxx = build.parse_compiler_errors(GXX_OUTPUT, ["/cache/.tmp-ab"])
    assert gxx == ["cpp_sources:8:5: error: 'yq' was not declared in this scope; did you mean 'yp'?"]
    ld = build.parse_compiler_errors(LD_OUTPUT)
    assert len(ld) == 1 and "undefined reference to `stitch_relu'" in ld[0]  # not collect2's summary
    assert build.parse_compiler_errors("collect2: error: ld returned 1 exit status") == [
        "collect2: error: ld returned 1 exit status"
    ]
    ptxas = "ptxas error   : Entry function '_Z4tilePf' uses too much shared data (0x12000 bytes, 0xc000 max)"
    assert build.parse_compiler_errors(ptxas) == [ptxas]
    assert build.parse_compiler_errors("nvcc fatal   : Unsupported gpu architecture 'compute_99'") != []
    many = "\n".join(f"a.cu({i}): error: bad" for i in range(30))
    assert len(build.parse_compiler_errors(many)) == build.MAX_ERRORS


def test_log_tail_drops_echoed_commands() -> None:
    tail = build.log_tail(GXX_OUTPUT, ["/cache/.tmp-ab"])
    assert "-MMD" not in tail and "ninja:" not in tail
    assert "cpp_sources:8:5: error: 'yq' was not declared" in tail


def test_kernel_names_from_global_declarations() -> None:
    cuda = """
    __global__ void relu_f4(const float4* x) {}
    template <int N> __global__ __launch_bounds__(256) void gemm_tile(float* c) {}
    extern "C" __global__ void
    reduce_rows (float* y) {}
    __device__ float helper(float v) { return v; }
    """
    assert build.kernel_names([cuda]) == ["relu_f4", "gemm_tile", "reduce_rows"]


@pytest.mark.parametrize(
    ("arch", "gencode", "arch_list"),
    [
        ("sm_90", "-gencode=arch=compute_90,code=sm_90", "9.0"),
        ("sm_90a", "-gencode=arch=compute_90a,code=sm_90a", "9.0a"),
        ("9.0", "-gencode=arch=compute_90,code=sm_90", "9.0"),
        ("compute_80", "-gencode=arch=compute_80,code=sm_80", "8.0"),
        ("sm_100", "-gencode=arch=compute_100,code=sm_100", "10.0"),
        ("10.0a", "-gencode=arch=compute_100a,code=sm_100a", "10.0a"),
    ],
)
def test_arch_spellings(arch: str, gencode: str, arch_list: str) -> None:
    assert build.gencode_flag(arch) == gencode
    assert build.torch_arch_list(arch) == arch_list


def test_bad_arch_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown CUDA arch 'hopper'"):
        build.parse_arch("hopper")


def test_cache_key_is_stable_and_sensitive() -> None:
    material = {"name": "relu", "cpp_sources": ["a"], "cflags": ["-O3"]}
    assert build.cache_key(material) == build.cache_key(dict(reversed(material.items())))
    assert build.cache_key(material) != build.cache_key({**material, "name": "relu2"})
    assert build.cache_key(material) != build.cache_key({**material, "cflags": ["-O2"]})


def test_flags_add_the_arch_only_when_the_program_gave_none() -> None:
    flags = build.effective_flags([], ["-O3"], [], [], with_cuda=True, arch="sm_90", source_count=2)
    assert "-gencode=arch=compute_90,code=sm_90" in flags.cuda_cflags
    assert flags.env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    given = build.effective_flags([], ["-arch=sm_80"], [], [], with_cuda=True, arch="sm_90", source_count=2)
    assert not any(f.startswith("-gencode") for f in given.cuda_cflags)
    cpu_only = build.effective_flags([], [], [], [], with_cuda=False, arch="sm_90", source_count=1)
    assert cpu_only.cuda_cflags == [] and "TORCH_CUDA_ARCH_LIST" not in cpu_only.env
    include, lib = build.pip_cuda_dirs()
    if include is not None:
        assert str(include) in flags.cflags and str(include) in flags.cuda_cflags
    if lib is not None:
        assert f"-L{lib}" in flags.ldflags
    if "MAX_JOBS" not in os.environ:
        assert cpu_only.env["MAX_JOBS"] == "1"  # one source file: one compile job


def test_install_patches_only_this_process_loaders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ce = build.cpp_extension()
    monkeypatch.setattr(ce, "load_inline", ce.load_inline)
    monkeypatch.setattr(ce, "load", ce.load)
    build.install_cached_load_inline("sm_90", tmp_path)
    from torch.utils.cpp_extension import load_inline

    assert load_inline.func is build.cached_load_inline
    assert load_inline.keywords["arch"] == "sm_90" and load_inline.keywords["cache_dir"] == tmp_path
    assert ce.load.func is build.cached_load


# ----------------------------------------------------------------------------------------------
# Real builds
# ----------------------------------------------------------------------------------------------

BUILD_SCRIPT = """
import json, sys
from tools import build
build.cached_load_inline("stitch_affine_test", open(sys.argv[1]).read(), no_implicit_headers=True,
                         cache_dir=sys.argv[2])
print(json.dumps(build.build_records()[-1].to_dict()))
"""


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[dict]]]:
    """Two processes build the same extension at once into one cache: the module's only good build."""
    cache = tmp_path_factory.mktemp("build-cache")
    cpp = cache.parent / "affine.cpp"
    cpp.write_text(affine_cpp())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BUILD_SCRIPT, str(cpp), str(cache)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    records = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        records.append(json.loads(out.strip().splitlines()[-1]))
    yield cache, records


@pytest.mark.slow
def test_parallel_builds_of_one_key_build_once(shared_cache: tuple[Path, list[dict]]) -> None:
    cache, records = shared_cache
    assert all(r["ok"] for r in records)
    assert sorted(r["cached"] for r in records) == [False, True]
    assert records[0]["module_name"] == records[1]["module_name"]
    key = records[0]["key"]
    assert records[0]["module_name"] == f"stitch_affine_test_{key[:12]}"
    assert sorted(p.name for p in cache.iterdir()) == sorted([key[:16], "locks"])  # no temp dirs left
    assert (
        json.loads((cache / key[:16] / build.META_FILE).read_text())["module_name"]
        == records[0]["module_name"]
    )


@pytest.mark.slow
def test_a_cached_build_loads_without_compiling(shared_cache: tuple[Path, list[dict]]) -> None:
    cache, records = shared_cache
    ext = build.cached_load_inline(
        "stitch_affine_test", affine_cpp(), no_implicit_headers=True, cache_dir=cache
    )
    record = build.build_records()[-1]
    assert record.cached and record.ok and record.module_name == records[0]["module_name"]
    assert record.seconds < 2.0
    x = torch.arange(6, dtype=torch.float32)
    y = torch.empty_like(x)
    ext.affine(x.data_ptr(), y.data_ptr(), x.numel(), 2.0, 0.5)
    assert torch.equal(y, x * 2 + 0.5)
    again = build.cached_load_inline(
        "stitch_affine_test", affine_cpp(), no_implicit_headers=True, cache_dir=cache
    )
    assert again is ext  # the same process reuses the module it already imported


def test_a_failing_build_raises_build_error_and_leaves_no_entry(tmp_path: Path) -> None:
    with pytest.raises(build.BuildError) as caught:
        build.cached_load_inline(
            "stitch_bad_flag",
            affine_cpp(),
            extra_cflags=["--no-such-flag"],
            no_implicit_headers=True,
            cache_dir=tmp_path,
        )
    error = caught.value
    assert "\n" not in str(error) and "stitch_bad_flag" in str(error)
    assert any("--no-such-flag" in e for e in error.errors)
    record = build.build_records()[-1]
    assert not record.ok and not record.cached and record.errors == error.errors
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locks"]


def test_cached_load_keys_on_file_contents(tmp_path: Path) -> None:
    source = tmp_path / "ext.cpp"
    keys = []
    for text in ("// one\n", "// two\n"):
        source.write_text(text + affine_cpp())
        with pytest.raises(build.BuildError):
            build.cached_load(
                "stitch_file_ext", [str(source)], extra_cflags=["--no-such-flag"], cache_dir=tmp_path
            )
        keys.append(build.build_records()[-1].key)
    assert keys[0] != keys[1]
