"""Build a generated program's extension for the CPU emulation and load the program around it.

The CUDA source is rewritten in two places g++ cannot read (`kernel<<<grid, block, smem, stream>>>(args)`
becomes `stitch_emu::launch(&kernel, ...)`; `extern __shared__ T name[];` a pointer to the launch's
dynamic shared memory), joined with the binding (include/pybind11: a ctypes-callable stand-in) and
compiled once per source (cached by content beside the build cache). The program's own Python then
runs unchanged except for two names: `_stitch_build` returns the emulated module and `_stitch_stream`
the null stream.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tools.cache_paths import default_cache_dir

INCLUDE = Path(__file__).resolve().parent / "include"
_EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:]+)\s+(?:__align__\(\s*\d+\s*\)\s+)?(\w+)\s*\[\s*\]\s*;"
)
_BUILD_CALL = re.compile(r"^(\w+)\s*=\s*_stitch_build\(", re.M)


class Unsupported(RuntimeError):
    """The program needs what the emulation does not have (a CUDA graph capture, a C++ compiler)."""


class EmulationBuildError(RuntimeError):
    """g++ rejected the rewritten source."""


def _matching(text: str, start: int, opening: str, closing: str) -> int:
    """Index of the bracket closing the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    raise EmulationBuildError(f"unbalanced {opening}{closing} after offset {start}")


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _kernel_start(text: str, end: int) -> int:
    """Where the kernel expression before `<<<` (at `end`) starts: a name with its template arguments."""
    j = end
    while j > 0 and text[j - 1].isspace():
        j -= 1
    if text[j - 1] == ">":
        depth = 0
        k = j - 1
        while k >= 0:
            if text[k] == ">":
                depth += 1
            elif text[k] == "<":
                depth -= 1
                if depth == 0:
                    break
            k -= 1
        j = k
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_:"):
        j -= 1
    return j


def rewrite_launches(source: str) -> str:
    """Every `kernel<<<grid, block[, smem[, stream]]>>>(args)` as a call of the emulator's launch."""
    out: list[str] = []
    pos = 0
    while (i := source.find("<<<", pos)) >= 0:
        start = _kernel_start(source, i)
        kernel = source[start:i].strip()
        close = source.find(">>>", i)
        config = _split_top_level(source[i + 3 : close])
        if len(config) < 2:
            raise EmulationBuildError(f"a launch of {kernel} without grid and block")
        config += ["0", "nullptr"][len(config) - 2 :]
        paren = source.find("(", close)
        end = _matching(source, paren, "(", ")")
        args = source[paren + 1 : end].strip()
        call = (
            f"stitch_emu::launch(&{kernel}, dim3({config[0]}), dim3({config[1]}), (size_t)({config[2]}), "
            f"(cudaStream_t)({config[3]}){', ' + args if args else ''})"
        )
        out += [source[pos:start], call]
        pos = end + 1
    out.append(source[pos:])
    return _EXTERN_SHARED.sub(r"\1* \2 = reinterpret_cast<\1*>(stitch_emu::dynamic_smem());", "".join(out))


def _cache_root() -> Path:
    """`<build cache>-emulation` beside the build cache: emulated binaries are not GPU builds."""
    build = default_cache_dir()
    return build.with_name(build.name + "-emulation")


class EmulatedModule:
    """The program's extension as ctypes sees it: one Python function per `m.def` of the binding."""

    def __init__(self, path: Path) -> None:
        self._lib = ctypes.CDLL(str(path))
        self._lib.stitch_emu_name.restype = ctypes.c_char_p
        self._lib.stitch_emu_kinds.restype = ctypes.c_char_p
        for i in range(self._lib.stitch_emu_count()):
            name = self._lib.stitch_emu_name(i).decode()
            setattr(self, name, self._function(i, name, self._lib.stitch_emu_kinds(i).decode()))

    def _function(self, index: int, name: str, kinds: str) -> Any:
        arguments, result_kind = kinds[:-1], kinds[-1]

        def call(*args: Any) -> Any:
            if len(args) != len(arguments):
                raise TypeError(f"{name}() takes {len(arguments)} arguments ({len(args)} given)")
            # 8-byte slots seen both as integers and as doubles; the last one holds the result
            ints = (ctypes.c_int64 * (len(args) + 1))()
            reals = (ctypes.c_double * (len(args) + 1)).from_buffer(ints)
            for i, (value, kind) in enumerate(zip(args, arguments, strict=True)):
                if kind == "d":
                    reals[i] = float(value)
                else:
                    ints[i] = int(value)
            error = ctypes.create_string_buffer(1024)
            result = ctypes.byref(ints, 8 * len(args))
            if self._lib.stitch_emu_call(index, ints, result, error, len(error)) != 0:
                raise RuntimeError(error.value.decode(errors="replace"))
            if result_kind == "v":
                return None
            return reals[len(args)] if result_kind == "d" else ints[len(args)]

        call.__name__ = name
        return call


@functools.cache
def _headers_digest() -> str:
    """The emulation headers' content, once per process: a build's cache key includes it."""
    return hashlib.sha256("".join(p.read_text() for p in sorted(INCLUDE.rglob("*.h"))).encode()).hexdigest()


def build_module(cuda_src: str, cpp_src: str) -> EmulatedModule:
    """The program's extension compiled for the emulation (cached by the sources and the headers)."""
    source = "#include <cuda_runtime.h>\n" + rewrite_launches(cuda_src) + "\n" + cpp_src
    key = hashlib.sha256((source + _headers_digest()).encode()).hexdigest()[:16]
    folder = _cache_root() / key
    binary = folder / "program.so"
    if not binary.exists():
        compiler = shutil.which("g++") or shutil.which("c++")
        if compiler is None:
            raise Unsupported("no C++ compiler")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "program.cpp").write_text(source)
        partial = folder / f"program.{os.getpid()}.partial"
        cmd = [compiler, "-std=c++17", "-O1", "-g0", "-w", "-shared", "-fPIC", f"-I{INCLUDE}"]
        cmd += [str(folder / "program.cpp"), "-o", str(partial)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "error" in line][:8]
            raise EmulationBuildError("\n".join(errors) or done.stderr[-2000:])
        partial.rename(binary)
    return EmulatedModule(binary)


def load_program(source: str) -> dict[str, Any]:
    """The program's namespace, its extension emulated: `ns["ModelNew"]` runs on CPU tensors."""
    if "CUDAGraph" in source:
        raise Unsupported("the program captures a CUDA graph")
    text, count = _BUILD_CALL.subn(r"\1 = _stitch_emulated_build(", source)
    if count == 0:
        raise Unsupported("the program builds no extension of ours")

    def emulated_build(_name: str, cuda_src: str, cpp_src: str, *_: Any, **__: Any) -> EmulatedModule:
        return build_module(cuda_src, cpp_src)

    namespace: dict[str, Any] = {
        "__name__": "stitch_emulated_program",
        "_stitch_emulated_build": emulated_build,
    }
    exec(compile(text, "<emulated program>", "exec"), namespace)
    namespace["_stitch_stream"] = lambda tensor: 0
    return namespace
