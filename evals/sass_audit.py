"""How many global loads each kernel of a generated program issues back to back (its SASS, CPU only).

    python -m evals.sass_audit level1/4_Softmax [PROBLEM ...] [--arch 90]

Why: a memory-bound kernel streams only with enough bytes in flight. A loop that uses each load before
it issues the next (a store to `saved`, a branch or a loop-carried value in between, and nothing
unrolled) keeps one load per thread in flight; with a block or a warp per row that is far below the
bandwidth, whatever the occupancy (the depthwise kernel's staging and the row kernels' loops were such
loops until 2026-12-05). This writes each problem's first offline program, compiles its CUDA source
with nvcc for the given architecture, disassembles it (cuobjdump, which ships in the triton wheel
torch depends on) and prints per kernel the longest run of consecutive global loads and how many
runs there are. Kernels whose runs are all 1 are marked for a look, except the one-element-per-thread
kinds (elementwise, fill, finish and finalize kernels), where the grid itself keeps the loads in flight
(a kernel that loads only one value per thread by design, such as a warp-per-row kernel over 32-wide
rows, is marked too: the mark is a hint, not a verdict). It also counts each kernel's local-memory
loads and stores: a register array the compiler could not unroll lives in local memory, and a row
kernel that stores and reloads it on every batch slows down (a batched logsumexp whose partial sums sat
in a halving loop's array measured 1.05 -> 1.50 ms on an H100, 2026-12-06). And it counts each kernel's
16-byte shared-memory accesses (LDS.128, STS.128): a float4 kept in shared memory as four scalar
accesses at a four-float stride per thread conflicts four ways on the banks (the long-row kernels'
heads did until 2026-12-06).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Kernels with one element (or a few) per thread and a grid as large as the data: a run of 1 is expected.
PER_ELEMENT = re.compile(
    r"stitch_ew_|fill_kernel|finish_kernel|finalize_kernel|gather_kernel|window_kernel|epilogue"
)
_FUNCTION = re.compile(r"\n\s+Function : (\S+)")
# What ends a run: an instruction that uses a loaded value or orders memory (float and double math,
# shuffles, shared-memory and global stores, barriers, branches); address arithmetic does not.
_OP = re.compile(
    r"\b(LDG|STG|STS|LDS|BAR|BRA|FADD|FFMA|FMUL|FMNMX|FSETP|FSEL|DADD|DFMA|DMUL|DSETP|MUFU|SHFL)\b"
)


def cuobjdump() -> str | None:
    """cuobjdump from the CUDA toolkit, else the one in the triton wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton
    except ImportError:
        return None
    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(path) if path.exists() else None


_LOCAL = re.compile(r"\b(LDL|STL)\b")
_WIDE_SHARED = re.compile(r"\b(?:LDS|STS)(?:\.[A-Z0-9]+)*\.128\b")


@dataclass
class KernelSass:
    """One kernel's audit: its runs of consecutive global loads, its local-memory instructions and its
    16-byte shared-memory accesses."""

    runs: list[int]
    local: int
    wide_shared: int = 0


def _kernels(sass: str) -> list[tuple[str, str]]:
    """(mangled name, SASS body) of each function cuobjdump printed."""
    parts = _FUNCTION.split(sass)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def local_memory(sass: str) -> dict[str, int]:
    """Kernel (mangled name) -> how many local-memory loads and stores its code holds."""
    return {name: len(_LOCAL.findall(body)) for name, body in _kernels(sass)}


def wide_shared(sass: str) -> dict[str, int]:
    """Kernel (mangled name) -> how many 16-byte shared-memory loads and stores its code holds."""
    return {name: len(_WIDE_SHARED.findall(body)) for name, body in _kernels(sass)}


def load_runs(sass: str) -> dict[str, list[int]]:
    """Kernel (mangled name) -> lengths of its runs of consecutive global loads, in program order."""
    found: dict[str, list[int]] = {}
    for name, body in _kernels(sass):
        runs, current = [], 0
        for op in _OP.findall(body):
            if op.startswith("LDG"):
                current += 1
            elif current:
                runs.append(current)
                current = 0
        if current:
            runs.append(current)
        if runs:
            found[name] = runs
    return found


def demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt")
    if tool is None:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out, strict=True)) if len(out) == len(names) else {n: n for n in names}


def audit(cuda_src: str, arch: str, include: list[str]) -> dict[str, KernelSass]:
    """Compile one program's CUDA source and read its kernels' load runs and local memory (demangled names)."""
    tool = cuobjdump()
    if tool is None:
        raise RuntimeError("no cuobjdump (CUDA toolkit or the triton wheel)")
    with tempfile.TemporaryDirectory(prefix="stitch-sass-") as tmp:
        source, obj = Path(tmp) / "program.cu", Path(tmp) / "program.o"
        source.write_text(cuda_src)
        flags = [f"-gencode=arch=compute_{arch},code=sm_{arch}", *(f"-I{i}" for i in include)]
        subprocess.run(
            ["nvcc", "-c", "-O3", *flags, str(source), "-o", str(obj)], check=True, capture_output=True
        )
        sass = subprocess.run([tool, "-sass", str(obj)], check=True, capture_output=True, text=True).stdout
    runs, local, wide = load_runs(sass), local_memory(sass), wide_shared(sass)
    names = demangle(list(runs))
    return {names[n]: KernelSass(r, local.get(n, 0), wide.get(n, 0)) for n, r in runs.items()}


def serial(kernel: str, runs: list[int]) -> bool:
    """One load in flight per thread everywhere, in a kind of kernel that loops over its data."""
    return max(runs) == 1 and not PER_ELEMENT.search(kernel)


def audit_problem(key: str, arch: str = "90") -> dict[str, KernelSass]:
    """The audit of each kernel of a suite problem's first offline program (full install)."""
    from codegen.emit.runtime import _stitch_cuda_lib_paths, _stitch_cudnn_paths
    from evals.device.verify_probe import first_program

    _, _, source = first_program(key)
    cuda = source.split("CUDA_SRC = r'''", 1)[1].split("'''", 1)[0]
    return audit(cuda, arch, _stitch_cuda_lib_paths()[0] + _stitch_cudnn_paths()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.sass_audit", description=__doc__.split("\n")[0])
    parser.add_argument("problems", nargs="+", help="level/stem keys of evals/suite")
    parser.add_argument("--arch", default="90")
    args = parser.parse_args(argv)
    for key in args.problems:
        print(f"== {key}")
        print("longest runs local lds/sts.128  kernel")
        for kernel, found in sorted(audit_problem(key, args.arch).items()):
            mark = "  <- one load in flight" if serial(kernel, found.runs) else ""
            mark += "  <- local memory" if found.local else ""
            print(
                f"{max(found.runs):7d} {len(found.runs):4d} {found.local:5d} {found.wide_shared:12d}  "
                f"{kernel[:110]}{mark}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
