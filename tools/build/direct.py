"""The direct build: torch's own build.ninja read for its exact flags, then our own parallel compile steps.

Why: `load_inline` compiles the binding (`c++`) after the kernels (`nvcc`) and recompiles pybind11
and the CUDA runtime headers every time. Here the kernels and the binding compile in parallel; the
binding's leading `#include <...>` block comes from a precompiled header built once per toolchain
and flag set; a binding that includes no torch header links without torch's libraries. Where this
torch lacks a private piece reused here, `DirectUnavailable` sends the build back to load_inline.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tools.build.cache import cache_key, import_library
from tools.build.toolchain import Flags, cpp_extension, toolchain_fingerprint

BUILDER_ENV = "STITCHCUDA_BUILDER"  # "direct" (default) or "torch"
PCH_ENV = "STITCHCUDA_PCH"  # "0" turns the precompiled binding header off
PCH_HEADER = "stitch_pch.h"
_TORCH_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"](?:torch|ATen|c10|caffe2)/', re.MULTILINE)
_SYSTEM_INCLUDE_RE = re.compile(r"#\s*include\s*<([^<>]+)>")
_TORCH_LIBS = frozenset(
    {
        "-lc10",
        "-lc10_cuda",
        "-lc10_hip",
        "-ltorch_cpu",
        "-ltorch_cuda",
        "-ltorch_hip",
        "-ltorch",
        "-ltorch_python",
    }
)


class DirectUnavailable(Exception):
    """This torch lacks a private piece the direct builder reuses: build with torch's load_inline."""


def builder_choice() -> str:
    """'direct' unless STITCHCUDA_BUILDER=torch (the benchmark's 'before' column uses that)."""
    return "torch" if os.environ.get(BUILDER_ENV, "direct").strip().lower() == "torch" else "direct"


def inline_sources(
    cpp_sources: list[str],
    cuda_sources: list[str],
    functions: str | Sequence[str] | dict[str, str] | None,
    with_pytorch_error_handling: bool,
    no_implicit_headers: bool,
) -> tuple[str, str | None]:
    """main.cpp and cuda.cu (None without CUDA sources) exactly as torch's load_inline writes them."""
    cpp = list(cpp_sources)
    if not no_implicit_headers:
        cpp.insert(0, "#include <torch/extension.h>")
    if functions is not None:
        if isinstance(functions, str):
            functions = [functions]
        if isinstance(functions, list | tuple):
            functions = {f: f for f in functions}
        if not isinstance(functions, dict):
            raise ValueError(f"Expected 'functions' to be a list or dict, but was {type(functions)}")
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for fname, doc in functions.items():
            target = f"torch::wrap_pybind_function({fname})" if with_pytorch_error_handling else fname
            cpp.append(f'm.def("{fname}", {target}, "{doc}");')
        cpp.append("}")
    if not cuda_sources:
        return "\n".join(cpp), None
    cuda = list(cuda_sources)
    if not no_implicit_headers:
        cuda[:0] = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
    return "\n".join(cpp), "\n".join(cuda)


def uses_torch_headers(*sources: str | None) -> bool:
    return any(src and _TORCH_INCLUDE_RE.search(src) for src in sources)


def include_prefix(source: str) -> list[str]:
    """The `<...>` headers of the source's leading include block (blank, `//` and #line lines skipped).

    Precompiling exactly these and force-including them first changes nothing in what the source
    sees: its own #includes of them are then no-ops behind their include guards.
    """
    headers: list[str] = []
    for raw in source.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", "#line", "# line")) or line == "#pragma once":
            continue
        match = _SYSTEM_INCLUDE_RE.fullmatch(line)
        if not match:
            break
        headers.append(match.group(1).strip())
    return headers


def _call_with_known(fn: Callable[..., Any], **kwargs: Any) -> Any:
    """Call a torch-private function with the keyword arguments its signature knows."""
    import inspect

    params = inspect.signature(fn).parameters
    required = [
        n for n, p in params.items() if p.default is inspect.Parameter.empty and p.kind != p.VAR_KEYWORD
    ]
    if any(n not in kwargs for n in required):
        raise DirectUnavailable(f"{fn.__name__} wants {required}")
    return fn(**{k: v for k, v in kwargs.items() if k in params})


def _ninja_variables(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        if line[:1].isspace() or " = " not in line or line.startswith(("rule ", "build ", "default ")):
            continue
        key, value = line.split(" = ", 1)
        values[key.strip()] = value.strip()
    return values


@dataclass
class _Plan:
    """The commands torch would run for one extension (parsed from the build.ninja it writes)."""

    cxx: list[str]
    nvcc: list[str]
    cflags: list[str]
    post_cflags: list[str]
    cuda_cflags: list[str]
    cuda_post_cflags: list[str]
    ldflags: list[str]


def torch_build_plan(directory: str, name: str, sources: list[str], flags: Flags, with_cuda: bool) -> _Plan:
    """Let this torch write its build.ninja for `sources` and read the compilers and flags from it."""
    import shlex

    ce = cpp_extension()
    writer = getattr(ce, "_write_ninja_file_to_build_library", None)
    prepare = getattr(ce, "_prepare_ldflags", None)
    if writer is None or prepare is None:
        raise DirectUnavailable("torch.utils.cpp_extension has no ninja writer")
    ldflags = _call_with_known(
        prepare,
        extra_ldflags=list(flags.ldflags),
        with_cuda=with_cuda,
        with_sycl=False,
        verbose=False,
        is_standalone=False,
    )
    path = os.path.join(directory, "build.ninja")
    _call_with_known(
        writer,
        path=path,
        name=name,
        sources=sources,
        extra_cflags=list(flags.cflags),
        extra_cuda_cflags=list(flags.cuda_cflags),
        extra_sycl_cflags=[],
        extra_ldflags=ldflags,
        extra_include_paths=list(flags.include_paths),
        with_cuda=with_cuda,
        with_sycl=False,
        is_standalone=False,
    )
    values = _ninja_variables(Path(path).read_text())
    if "cxx" not in values or "cflags" not in values or "ldflags" not in values:
        raise DirectUnavailable("unexpected build.ninja layout")
    if with_cuda and "nvcc" not in values:
        raise DirectUnavailable("build.ninja names no nvcc")

    def split(key: str) -> list[str]:
        return shlex.split(values.get(key, ""))

    return _Plan(
        cxx=split("cxx"),
        nvcc=split("nvcc"),
        cflags=split("cflags"),
        post_cflags=split("post_cflags"),
        cuda_cflags=split("cuda_cflags"),
        cuda_post_cflags=split("cuda_post_cflags"),
        ldflags=split("ldflags"),
    )


def without_torch_libraries(ldflags: list[str]) -> list[str]:
    """Drop torch's own -L/-l flags: a binding that includes no torch header references none of them."""
    ce = cpp_extension()
    torch_lib = getattr(ce, "TORCH_LIB_PATH", os.path.join(os.path.dirname(torch.__file__), "lib"))
    return [f for f in ldflags if f not in _TORCH_LIBS and f != f"-L{torch_lib}"]


def _run(cmd: list[str], cwd: str) -> tuple[int, str, float]:
    started = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace", check=False)
    except OSError as exc:
        return 127, f"{cmd[0]}: error: cannot run the compiler: {exc}", time.perf_counter() - started
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


def precompiled_header(
    root: Path, cxx: list[str], flags: list[str], headers: list[str]
) -> tuple[Path | None, float, str]:
    """(header to force-include, seconds spent building it here, note) for `headers` under `flags`.

    One .gch per (compiler, flags, header list), built under a lock into `root` and renamed into
    place, so concurrent builders wait for the first one. None when it cannot be built.
    """
    text = "".join(f"#include <{h}>\n" for h in headers)
    key = cache_key({"pch": text, "cxx": cxx, "version": toolchain_fingerprint(False)["cxx"], "flags": flags})
    final = root / key[:16]
    header = final / PCH_HEADER
    if (header.parent / (PCH_HEADER + ".gch")).exists():
        return header, 0.0, "cached"
    started = time.perf_counter()
    (root / "locks").mkdir(parents=True, exist_ok=True)
    with open(root / "locks" / f"{key[:16]}.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            if (final / (PCH_HEADER + ".gch")).exists():
                return header, time.perf_counter() - started, "waited"
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=root))
            (tmp / PCH_HEADER).write_text(text)
            cmd = [*cxx, *flags, "-x", "c++-header", PCH_HEADER, "-o", PCH_HEADER + ".gch"]
            code, output, _ = _run(cmd, str(tmp))
            if code != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                first = next((line for line in output.splitlines() if "error" in line), output[:200])
                return None, time.perf_counter() - started, f"failed: {first.strip()}"
            (tmp / "stitch_pch.json").write_text(json.dumps({"headers": headers, "flags": flags, "cxx": cxx}))
            try:
                os.rename(tmp, final)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
            return header, time.perf_counter() - started, "built"
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def pch_wanted(headers: list[str]) -> bool:
    """Worth it for a pybind11 binding; never for torch's headers (a .gch of them is ~1 GB)."""
    heavy = any(h.split("/", 1)[0] in ("torch", "ATen", "c10", "caffe2") for h in headers)
    return (
        os.environ.get(PCH_ENV, "1") != "0" and not heavy and any(h.startswith("pybind11/") for h in headers)
    )


def direct_build(
    directory: str,
    module_name: str,
    main_cpp: str,
    cuda_cu: str | None,
    flags: Flags,
    pch_dir: Path,
    details: dict[str, Any],
) -> Any:
    """Build and import `module_name` in `directory` with torch's commands, run here in parallel.

    Fills details["phases"] (seconds per step, the PCH's state) and details["commands"]. A compile
    error raises RuntimeError("Error building extension ...: <compiler output>"), as torch does.
    """
    with_cuda = cuda_cu is not None
    main_path = os.path.join(directory, "main.cpp")
    Path(main_path).write_text(main_cpp)
    sources = [main_path]
    if with_cuda:
        sources.append(os.path.join(directory, "cuda.cu"))
        Path(sources[1]).write_text(cuda_cu or "")
    plan = torch_build_plan(directory, module_name, sources, flags, with_cuda)
    phases: dict[str, Any] = {}
    commands: dict[str, list[str]] = {}
    details.update(builder="direct", phases=phases, commands=commands)

    results: dict[str, tuple[int, str, float]] = {}
    nvcc_thread = None
    if with_cuda:
        commands["nvcc"] = [*plan.nvcc, *plan.cuda_cflags, "-c", sources[1], "-o", "cuda.cuda.o"]
        commands["nvcc"] += plan.cuda_post_cflags

        def compile_cuda() -> None:
            results["nvcc"] = _run(commands["nvcc"], directory)

        nvcc_thread = threading.Thread(target=compile_cuda, daemon=True)
        nvcc_thread.start()

    cxx_cmd = [*plan.cxx, *plan.cflags]
    headers = include_prefix(main_cpp)
    phases["pch"] = "off"
    if pch_wanted(headers):
        pch_flags = [f for f in plan.cflags if not f.startswith("-DTORCH_EXTENSION_NAME=")] + plan.post_cflags
        header, seconds, note = precompiled_header(pch_dir, plan.cxx, pch_flags, headers)
        phases["pch"], phases["pch_s"] = note, round(seconds, 3)
        if header is not None:
            cxx_cmd += ["-include", str(header), "-Winvalid-pch"]
            phases["pch_header"] = str(header)
    commands["cxx"] = [*cxx_cmd, "-c", main_path, "-o", "main.o", *plan.post_cflags]
    results["cxx"] = _run(commands["cxx"], directory)
    if nvcc_thread is not None:
        nvcc_thread.join()
    for step in ("cxx", "nvcc"):
        if step in results:
            phases[f"{step}_s"] = round(results[step][2], 3)
    if "pch_header" in phases:
        phases["pch_used"] = ".gch: not used because" not in results["cxx"][1]
    failed = [(step, out) for step, (code, out, _) in results.items() if code != 0]
    if failed:
        text = "\n".join(f"FAILED: {step}\n{out}" for step, out in sorted(failed))
        raise RuntimeError(f"Error building extension '{module_name}': {text}")

    torch_free = not uses_torch_headers(main_cpp, cuda_cu)
    objects = ["main.o", *(["cuda.cuda.o"] if with_cuda else [])]
    library = f"{module_name}.so"
    ldflags = without_torch_libraries(plan.ldflags) if torch_free else plan.ldflags
    commands["link"] = [*plan.cxx, *objects, *ldflags, "-o", library]
    code, output, seconds = _run(commands["link"], directory)
    phases["link_s"] = round(seconds, 3)
    phases["torch_libs"] = not torch_free
    if code != 0:
        raise RuntimeError(f"Error building extension '{module_name}': FAILED: link\n{output}")
    started = time.perf_counter()
    try:
        module = import_library(Path(directory) / library, module_name, True)
    except ImportError as exc:
        if not torch_free or "undefined symbol" not in str(exc):
            raise
        # A binding that reaches torch without its headers (declared by hand): link torch after all.
        commands["link"] = [*plan.cxx, *objects, *plan.ldflags, "-o", library]
        code, output, seconds = _run(commands["link"], directory)
        phases["link_s"] = round(phases["link_s"] + seconds, 3)
        phases["torch_libs"] = True
        if code != 0:
            raise RuntimeError(f"Error building extension '{module_name}': FAILED: link\n{output}") from None
        module = import_library(Path(directory) / library, module_name, True)
    phases["import_s"] = round(time.perf_counter() - started, 3)
    return module
