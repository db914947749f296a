"""The direct builder: torch's flags, a shared precompiled binding header, lean links, fast cache hits.

The fast path must be an optimisation only: the same programs build, the same errors come back with
their file:line, and the modules compute the same results as torch's own `load_inline` builds. The
tests check that the precompiled header is really used by the compiler (not just requested), that a
torch-free binding is linked without torch's libraries, and that a cache hit in a fresh process
takes under a second.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tools import build
from tools.evaluate import prebuild

REPO = Path(__file__).resolve().parents[2]
AFFINE = REPO / "tests" / "candidates" / "worker" / "affine_ok.py"
RELU = REPO / "docs" / "examples" / "relu_solution.py"


def program_string(path: Path, name: str) -> str:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.name} has no {name}")


AFFINE_CPP = program_string(AFFINE, "CPP_SRC")


def needed_libraries(library: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def entry_dir(record: build.BuildRecord) -> Path:
    return Path(record.directory)


# ----------------------------------------------------------------------------------------------
# Pure pieces
# ----------------------------------------------------------------------------------------------


def test_include_prefix_stops_at_the_first_other_line() -> None:
    source = (
        '#line 1 "cpp_sources"\n\n// binding\n#include <pybind11/pybind11.h>\n#include  <cstdint>\n'
        '#include "local.h"\n#include <string>\n'
    )
    assert build.include_prefix(source) == ["pybind11/pybind11.h", "cstdint"]
    assert build.include_prefix("#define X 1\n#include <pybind11/pybind11.h>\n") == []


def test_pch_only_for_pybind11_bindings_without_torch_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert build.pch_wanted(["pybind11/pybind11.h", "cstdint"])
    assert not build.pch_wanted(["cstdint", "string"])  # nothing heavy to save
    assert not build.pch_wanted(["torch/extension.h", "pybind11/pybind11.h"])
    monkeypatch.setenv(build.PCH_ENV, "0")
    assert not build.pch_wanted(["pybind11/pybind11.h"])


def test_inline_sources_match_torch_load_inline_layout() -> None:
    main, cuda = build.inline_sources(["int f();"], ["__global__ void k() {}"], ["f"], True, False)
    assert main.splitlines() == [
        "#include <torch/extension.h>",
        "int f();",
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",
        'm.def("f", torch::wrap_pybind_function(f), "f");',
        "}",
    ]
    assert cuda is not None and cuda.splitlines()[:3] == [
        "#include <torch/types.h>",
        "#include <cuda.h>",
        "#include <cuda_runtime.h>",
    ]
    assert build.uses_torch_headers(main, cuda)
    lean, none = build.inline_sources([AFFINE_CPP], [], None, True, True)
    assert lean == AFFINE_CPP and none is None and not build.uses_torch_headers(lean)


def test_torch_plan_has_torchs_flags_and_leaner_link(tmp_path: Path) -> None:
    (tmp_path / "main.cpp").write_text(AFFINE_CPP)
    flags = build.effective_flags(["-O1"], [], [], [], with_cuda=False, arch=None, source_count=1)
    plan = build.torch_build_plan(str(tmp_path), "ext_x", [str(tmp_path / "main.cpp")], flags, False)
    assert "-DTORCH_EXTENSION_NAME=ext_x" in plan.cflags and "-fPIC" in plan.cflags and "-O1" in plan.cflags
    assert any(f.startswith("-std=") for f in plan.cflags)
    assert "-ltorch" in plan.ldflags and "-shared" in plan.ldflags
    lean = build.without_torch_libraries(plan.ldflags)
    assert "-shared" in lean and not any(f.startswith("-ltorch") or f.startswith("-lc10") for f in lean)


def test_builder_choice_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(build.BUILDER_ENV, raising=False)
    assert build.builder_choice() == "direct"
    monkeypatch.setenv(build.BUILDER_ENV, "torch")
    assert build.builder_choice() == "torch"


# ----------------------------------------------------------------------------------------------
# Real builds
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fast_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fast-cache")


@pytest.fixture(scope="module")
def affine_direct(fast_cache: Path) -> build.BuildRecord:
    """The affine binding built once by the direct builder (the module's PCH is made here)."""
    os.environ.pop(build.BUILDER_ENV, None)
    build.cached_load_inline("stitch_fast_affine", AFFINE_CPP, no_implicit_headers=True, cache_dir=fast_cache)
    return build.build_records()[-1]


@pytest.mark.slow
def test_direct_build_uses_the_precompiled_header(affine_direct: build.BuildRecord, tmp_path: Path) -> None:
    record = affine_direct
    assert record.ok and not record.cached and record.builder == "direct"
    assert record.phases["pch"] in ("built", "cached", "waited") and record.phases["pch_used"] is True
    header = Path(record.phases["pch_header"])
    assert header.with_name(header.name + ".gch").exists()
    # Ask the compiler itself: rerun the recorded command with -H; "! X.gch" means the PCH was read.
    meta = json.loads((entry_dir(record) / build.META_FILE).read_text())
    cmd = list(meta["commands"]["cxx"])
    cmd[cmd.index("-c") + 1] = str(entry_dir(record) / "main.cpp")
    cmd[cmd.index("-o") + 1] = str(tmp_path / "check.o")
    shown = subprocess.run([*cmd, "-H"], capture_output=True, text=True, check=True).stderr.splitlines()
    assert f"! {header}.gch" in shown
    assert not any(line.startswith(". ") and "pybind11/pybind11.h" in line for line in shown)


@pytest.mark.slow
def test_direct_build_works_and_skips_torch_libraries(affine_direct: build.BuildRecord) -> None:
    record = affine_direct
    ext = build.cached_load_inline(
        "stitch_fast_affine", AFFINE_CPP, no_implicit_headers=True, cache_dir=Path(record.directory).parent
    )
    x = torch.arange(8, dtype=torch.float32)
    y = torch.empty_like(x)
    ext.affine(x.data_ptr(), y.data_ptr(), x.numel(), 3.0, -1.0)
    assert torch.equal(y, x * 3 - 1)
    libs = needed_libraries(entry_dir(record) / f"{record.module_name}.so")
    assert not any(lib.startswith(("libtorch", "libc10")) for lib in libs), libs
    assert record.phases["torch_libs"] is False


@pytest.mark.slow
def test_another_module_reuses_the_same_header(affine_direct: build.BuildRecord, fast_cache: Path) -> None:
    build.cached_load_inline(
        "stitch_fast_affine_two", "// second\n" + AFFINE_CPP, no_implicit_headers=True, cache_dir=fast_cache
    )
    second = build.build_records()[-1]
    assert second.ok and second.phases["pch"] == "cached" and second.phases["pch_used"] is True
    assert second.phases["pch_header"] == affine_direct.phases["pch_header"]  # a different extension name


CACHE_HIT_SCRIPT = """
import json, sys, time
from tools import build
source = open(sys.argv[1]).read()
started = time.perf_counter()
build.cached_load_inline("stitch_fast_affine", source, no_implicit_headers=True, cache_dir=sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - started, "cached": build.build_records()[-1].cached}))
"""


@pytest.mark.slow
def test_cache_hit_in_a_fresh_process_takes_under_a_second(
    affine_direct: build.BuildRecord, fast_cache: Path, tmp_path: Path
) -> None:
    src = tmp_path / "affine.cpp"
    src.write_text(AFFINE_CPP)
    done = subprocess.run(
        [sys.executable, "-c", CACHE_HIT_SCRIPT, str(src), str(fast_cache)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    hit = json.loads(done.stdout.strip().splitlines()[-1])
    assert hit["cached"] is True and hit["seconds"] < 1.0


@pytest.mark.slow
def test_compile_error_keeps_file_and_line(fast_cache: Path) -> None:
    broken = AFFINE_CPP.replace("yp[i] = ", "yq[i] = ")
    with pytest.raises(build.BuildError) as caught:
        build.cached_load_inline("stitch_fast_broken", broken, no_implicit_headers=True, cache_dir=fast_cache)
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "yq[i]" in text)
    assert any(
        e.startswith(f"cpp_sources:{line}:") and re.search(r"[‘']yq[’']", e) for e in caught.value.errors
    )
    record = build.build_records()[-1]
    assert record.builder == "direct" and not record.ok
    assert not [p for p in fast_cache.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.slow
def test_torch_builder_gives_an_equivalent_module(
    affine_direct: build.BuildRecord, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(build.BUILDER_ENV, "torch")
    ext = build.cached_load_inline(
        "stitch_fast_torch", AFFINE_CPP, no_implicit_headers=True, cache_dir=tmp_path
    )
    record = build.build_records()[-1]
    assert record.ok and record.builder == "torch" and record.phases == {}
    assert any(
        lib.startswith("libtorch") for lib in needed_libraries(entry_dir(record) / f"{record.module_name}.so")
    )
    direct = build.cached_load_inline(
        "stitch_fast_affine",
        AFFINE_CPP,
        no_implicit_headers=True,
        cache_dir=Path(affine_direct.directory).parent,
    )
    x = torch.linspace(-2, 2, 11)
    y, z = torch.empty_like(x), torch.empty_like(x)
    ext.affine(x.data_ptr(), y.data_ptr(), x.numel(), 0.5, 0.25)
    direct.affine(x.data_ptr(), z.data_ptr(), x.numel(), 0.5, 0.25)
    assert torch.equal(y, x * 0.5 + 0.25) and torch.equal(y, z)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_program_builds_kernels_beside_the_binding(fast_cache: Path) -> None:
    cuda = program_string(RELU, "CUDA_SRC")
    cpp = program_string(RELU, "CPP_SRC")
    ext = build.cached_load_inline(
        "stitch_fast_relu", cpp, cuda, extra_cuda_cflags=["-O3"], no_implicit_headers=True, arch="sm_90",
        cache_dir=fast_cache,
    )  # fmt: skip
    record = build.build_records()[-1]
    assert record.ok and record.builder == "direct" and record.kernels == ["relu_f4", "relu_tail"]
    assert record.phases["nvcc_s"] > 0 and record.phases["pch_used"] is True
    assert (
        "-gencode=arch=compute_90,code=sm_90"
        in json.loads((entry_dir(record) / build.META_FILE).read_text())["commands"]["nvcc"]
    )
    libs = needed_libraries(entry_dir(record) / f"{record.module_name}.so")
    assert any(lib.startswith("libcudart") for lib in libs)
    assert not any(lib.startswith(("libtorch", "libc10")) for lib in libs)
    assert callable(ext.relu)


@pytest.mark.slow
def test_prebuild_builds_candidates_in_their_own_workers(
    affine_direct: build.BuildRecord, tmp_path: Path
) -> None:
    program = AFFINE.read_text()
    sources = [program.replace("stitch_affine_test", f"stitch_pre_{i}") for i in range(2)]
    sources.append(program.replace("yp[i] = ", "yq[i] = ").replace("stitch_affine_test", "stitch_pre_bad"))
    first = prebuild(sources, cache_dir=tmp_path, jobs=3, timeout_s=300)
    assert [r["status"] for r in first] == ["passed", "passed", "build_error"]
    assert all(not r["build"]["cached"] for r in first[:2])
    assert first[0]["build"]["extensions"] != first[1]["build"]["extensions"]
    again = prebuild(sources[:2], cache_dir=tmp_path)
    assert all(r["status"] == "passed" and r["build"]["cached"] for r in again)


# ----------------------------------------------------------------------------------------------
# The benchmark script's bookkeeping (the builds themselves run on the lead's machines)
# ----------------------------------------------------------------------------------------------


def test_build_times_variants_are_distinct_programs() -> None:
    from evals.benchmarks import build_times

    kb = [build_times.variant_kwargs("kb-torch", i) for i in range(2)]
    ours = [build_times.variant_kwargs("ours-direct", i) for i in range(2)]
    assert kb[0]["cuda_sources"] != kb[1]["cuda_sources"] and kb[0]["functions"] == ["relu_cuda"]
    assert "torch/extension.h" in kb[0]["cuda_sources"]
    assert ours[0]["no_implicit_headers"] and not build.uses_torch_headers(
        ours[0]["cuda_sources"], ours[0]["cpp_sources"]
    )
    assert ours[0]["cuda_sources"] != ours[1]["cuda_sources"]


def test_build_times_summary_by_hand() -> None:
    from evals.benchmarks import build_times

    def run(seconds: float, cached: bool, **phases: object) -> dict:
        return {
            "ok": True,
            "seconds": seconds,
            "cached": cached,
            "phases": phases,
            "process_wall_s": seconds + 3,
        }

    runs = [
        {
            "style": "ours-direct",
            "first": run(20.0, False, pch="built"),
            "cold": [
                {**run(s, False, nvcc_s=1.0, cxx_s=s - 1, link_s=0.2, pch_used=True), "builder": "direct"}
                for s in (4.0, 6.0, 5.0)
            ],
            "cached": [run(0.01, True), run(0.03, True), run(0.02, True)],
            "cold_batch_wall_s": 15.0,
        }
    ]
    (row,) = build_times.summarize(runs, parallel=1)
    assert row["cold"] == {"median": 5.0, "min": 4.0, "max": 6.0}
    assert row["cached"]["median"] == 0.02 and row["failed"] == 0 and row["pch_used"] == "yes"
    assert row["phases_median"]["cxx_s"] == 4.0 and row["first_build_with_pch_s"] == 20.0
    line = build_times.table([row]).splitlines()[-1]
    assert line.startswith(
        "| ours-direct | direct | 3 | 5.00 | 4.00 | 6.00 | 0.020 | 0.030 | 20.00 | 1.00 | 4.00 | 0.20 | yes |"
    )
