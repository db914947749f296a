"""Host time of a convolution program's Python helper per call, against an older copy of it.

    python -m evals.benchmarks.conv_helper_host [--against REV] [--calls 20000] [--rounds 3]

Why: every timed call of the strict harness and of KernelBench's starts after a synchronisation and
waits for the host work before the first kernel, and for a plain convolution our helper's Python was
a large part of it (docs/convolutions.md). This times `_stitch_conv` (codegen/emit/conv_runtime.py)
with the extension call and the stream lookup stubbed out, on CPU tensors, so only the Python is
measured; `--against REV` times the same file at a git revision in alternating rounds (default: the
revision before the shape dictionary).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
RUNTIME = "codegen/emit/conv_runtime.py"
BEFORE_DICTIONARY = "d5295f8"  # the helper as the tenth session left it


class _NoExtension:
    """The built extension's stand-in: takes the call's arguments and needs no workspace."""

    def conv(self, *args: Any) -> int:
        return 0


def load_helper(path: Path, name: str) -> ModuleType:
    """conv_runtime.py from `path` as a module, with the extension and the stream lookup stubbed."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._ext = _NoExtension()  # type: ignore[attr-defined]
    module._stitch_stream = lambda tensor: 0  # type: ignore[attr-defined]
    return module


def per_call_us(module: ModuleType, calls: int) -> float:
    """Mean microseconds per `_stitch_conv` call of a 3x3 dilated convolution with a bias."""
    x, w, b = torch.empty(16, 64, 8, 8), torch.empty(64, 64, 3, 3), torch.empty(64)
    conv = module._stitch_conv
    args = (x, w, b, None, (1, 1), (2, 2), (2, 2), 1, False, (0, 0), 0)
    for _ in range(min(calls, 200)):
        conv(*args)
    started = time.perf_counter()
    for _ in range(calls):
        conv(*args)
    return (time.perf_counter() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=BEFORE_DICTIONARY, help="git revision of the older helper")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    old_text = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{args.against}:{RUNTIME}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        old_path = Path(folder) / "conv_runtime_old.py"
        old_path.write_text(old_text)
        helpers = {
            args.against: load_helper(old_path, "conv_runtime_old"),
            "now": load_helper(REPO / RUNTIME, "now"),
        }
        times: dict[str, list[float]] = {name: [] for name in helpers}
        for _ in range(args.rounds):  # alternating, so the host's drift falls on both alike
            for name, module in helpers.items():
                times[name].append(per_call_us(module, args.calls))
    print("| helper | us per call (each round) |")
    print("|---|---|")
    for name, values in times.items():
        print(f"| {name} | {', '.join(f'{v:.2f}' for v in values)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
