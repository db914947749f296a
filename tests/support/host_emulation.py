"""Template kernels compiled as plain C++ (STITCH_HOST_EMULATION), so their index math runs on the CPU."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def build_emulator(folder: Path, main_source: str) -> Path:
    """Compile `main_source` (which includes template headers) with g++ against the template folder;
    skips the calling test when there is no C++ compiler."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    from codegen.emit.cuda_unit import TEMPLATE_DIR

    (folder / "main.cpp").write_text(main_source)
    binary = folder / "emulate"
    cmd = [
        compiler,
        "-std=c++17",
        "-O1",
        "-w",
        f"-I{TEMPLATE_DIR}",
        str(folder / "main.cpp"),
        "-o",
        str(binary),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return binary
