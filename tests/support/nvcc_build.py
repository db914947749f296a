"""Build one generated program with the real nvcc and load it as KernelBench's harness does.

Why shared: every op family's CPU test proves its generated program compiles and imports; the
loading rule (the reference exec'd into a dict, then the program into the same dict) and the
extension cache are the same for all of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)

RUNNER = r"""
import json, sys
context = {}
exec(compile(open(sys.argv[2]).read(), "<string>", "exec"), context)
exec(compile(open(sys.argv[1]).read(), "<string>", "exec"), context)
print(json.dumps(sorted(n for n in dir(context["_ext"]) if not n.startswith("_"))))
"""


def build_and_load(program: Path, problem: Path, timeout_s: float = 900) -> list[str]:
    """The public names of the program's extension; raises AssertionError with the log when the
    build or the load fails."""
    cache = Path(tempfile.gettempdir()) / "stitchcuda-codegen-test-extensions"
    cache.mkdir(exist_ok=True)
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(cache), MAX_JOBS="2")
    env["PATH"] = f"{Path(str(NVCC)).parent}:{env.get('PATH', '')}"
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(program), str(problem)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))
