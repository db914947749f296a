"""Template kernels compiled as plain C++ (STITCH_HOST_EMULATION), so their index math runs on the CPU."""

from __future__ import annotations

import re
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


def common_section(name: str, template: str = "common.cuh") -> str:
    """A section of a template (templates/common.cuh by default) that compiles alone (between `// ---- NAME`
    and `// ---- end of NAME`), for emulations of templates that use it."""
    from codegen.emit.cuda_unit import TEMPLATE_DIR

    common = (TEMPLATE_DIR / template).read_text()
    found = re.search(rf"// ---- {name}\b.*?\n(.*?)// ---- end of {name}", common, re.S)
    assert found is not None, f"{template} lost the {name} section's markers"
    return found.group(1)
