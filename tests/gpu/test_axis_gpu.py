"""On a GPU: the AXIS family (argmax / argmin, max / min with indices, logsumexp, softmax over a
non-last dim) and prod / reductions over a first or middle dim, against PyTorch and float64.

Cases: one program per kernel path at odd sizes (warp rows, block rows, rows split over several
blocks, the flattened tensor, columns, columns split over R, full and first-dim reductions split
over blocks, ties from integer-valued inputs, NaN
and -inf from a log prologue, values with an epilogue next to the indices, a prologue result that is
also stored), the same programs as a CUDA graph and at demotion level 1, and the suite's problems
that use these ops at full size (timed against eager, CUDA events, median of 3 x 10 calls).
Float outputs must match the fp32 reference (allclose 1e-4, NaN equal) and stay within
max(1e-5, 16 x the fp32 reference's own) normalised error against float64; int64 indices must equal
PyTorch's exactly (the prologues here are exact in fp32, so there are no near-ties to round apart).

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_axis_gpu.py --write out/axis-gpu
and run there (out/axis-gpu carried) with
  STITCH_AXIS_PROGRAMS=out/axis-gpu python -m pytest -q -s tests/gpu/test_axis_gpu.py
Knobs: STITCH_AXIS_ONLY=substring of labels, STITCH_AXIS_JOBS=parallel builds (default 8),
STITCH_AXIS_RESULTS=file (the table's rows as JSON lines).
"""

from __future__ import annotations

import copy
import json
import os
import runpy
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evals" / "suite"

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ARG_VARIANTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, short, long, few, cube, tall, ints, flat):
        v, i = torch.max(cube, dim=1)
        w, j = torch.min(short, 1, keepdim=True)
        return (
            torch.argmax(short, dim=1),
            short.argmin(dim=-1, keepdim=True),
            torch.argmax(long, 1),
            torch.argmin(few, 1),
            torch.argmax(cube, dim=1),
            torch.argmin(cube, dim=0, keepdim=True),
            torch.argmax(tall, dim=0),
            torch.argmax(ints, dim=1),
            torch.argmin(ints, dim=0),
            torch.argmax(ints),
            torch.argmax(flat * 2.0 - 1.0),
            torch.argmax(torch.log(short - 0.3), dim=1),
            torch.argmin(torch.log(torch.relu(short - 0.5)), dim=1),
            torch.argmax(torch.log(cube - 0.2), dim=1),
            v * 2.0 + 1.0,
            i,
            w,
            j,
            torch.max(tall, 0)[1],
        )


def get_inputs():
    return [
        torch.rand(1000, 37),
        torch.rand(300, 20001),
        torch.rand(3, 1000000),
        torch.rand(6, 333, 70),
        torch.rand(65536, 40),
        torch.randint(0, 5, (512, 300)).float(),
        torch.rand(5000001),
    ]


def get_init_inputs():
    return []
"""
LSE_VARIANTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, short, long, few, cube, tall):
        t = torch.tanh(short * 3.0)
        return (
            torch.logsumexp(short * 20.0, dim=1),
            torch.logsumexp(long, 1, keepdim=True),
            torch.logsumexp(few * 50.0, dim=-1),
            torch.logsumexp(cube, dim=1),
            torch.logsumexp(cube, dim=(1, 2)),
            torch.logsumexp(tall, dim=0) - 1.0,
            torch.logsumexp(torch.log(torch.relu(short - 0.9)), dim=1),
            torch.logsumexp(t, dim=1) + t.sum(),
        )


def get_inputs():
    return [
        torch.rand(1000, 37),
        torch.rand(300, 20001),
        torch.rand(3, 1000000),
        torch.rand(6, 333, 70),
        torch.rand(65536, 40),
    ]


def get_init_inputs():
    return []
"""
SOFTMAX_VARIANTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=1)

    def forward(self, img, cube, tall, near1):
        return (
            self.softmax(img),
            torch.log_softmax(img * 4.0, dim=1),
            torch.softmax(cube, dim=1) * 2.0 - 1.0,
            torch.softmax(tall * 8.0, dim=0),
            torch.log_softmax(tall, 0),
            torch.softmax(torch.log(cube - 0.01), dim=0),
            torch.prod(near1, dim=1),
            torch.prod(near1, 0, keepdim=True),
            torch.sum(tall, dim=0),
            torch.amax(cube, dim=(0, 1)),
            torch.mean(img, dim=1),
            tall.sum(),
            torch.mean(near1 - 1.0),
            torch.prod(near1.reshape(-1)[:4000] * 0.5 + 0.5),
        )


def get_inputs():
    return [
        torch.rand(8, 19, 33, 35),
        torch.rand(6, 333, 70),
        torch.rand(20000, 24),
        torch.rand(16, 300, 130) * 0.02 + 0.99,
    ]


def get_init_inputs():
    return []
"""
CASES = {"arg": ARG_VARIANTS, "lse": LSE_VARIANTS, "softmax": SOFTMAX_VARIANTS}
SUITE_NAMES = ("Argmax", "Argmin", "LogSumExp", "Softmax_Channels", "Prod")


def suite_problems() -> list[Path]:
    return [p for p in sorted(SUITE.glob("level[12]/*.py")) if any(n in p.stem for n in SUITE_NAMES)]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    from codegen.emit.assemble import Options, assemble
    from codegen.schedule.plan import analyse
    from graph.artifacts import Task

    folder.mkdir(parents=True, exist_ok=True)
    problems: list[tuple[str, Path, bool]] = []
    for label, source in CASES.items():
        (folder / f"{label}.py").write_text(source)
        problems.append((label, folder / f"{label}.py", False))
    problems += [(p.stem, p, True) for p in suite_problems()]
    manifest: list[dict[str, Any]] = []
    for label, path, timed in problems:
        analysis = analyse(Task(name=path.stem, path=str(path), source=path.read_text()))
        groups = [s.group.id for s in analysis.steps if s.group is not None and s.group.covered]
        variants = [("", Options(arch=arch))]
        if not timed:
            variants += [(" graph", Options(arch=arch, cuda_graph=True))]
            variants += [(" split", Options(arch=arch, levels={g: 1 for g in groups}))]
        for suffix, options in variants:
            program = assemble(analysis, options)
            name = f"{path.stem}{suffix.replace(' ', '_')}_program.py"
            (folder / name).write_text(program.source)
            if path.parent != folder:
                (folder / path.name).write_text(path.read_text())
            manifest.append(
                {
                    "label": label + suffix,
                    "problem": path.name,
                    "program": name,
                    "timed": timed,
                    "templates": sorted(set(program.templates.values())),
                    "uncovered": program.uncovered_ops,
                }
            )
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _leaves(v)] if isinstance(value, (tuple, list)) else []


def _relative_error(a: torch.Tensor, ref64: torch.Tensor) -> float:
    finite = torch.isfinite(ref64)
    diff = float((a.double() - ref64)[finite].norm())
    scale = float(ref64[finite].norm())
    return diff / scale if scale > 0 else diff


def _median_ms(model: Any, inputs: list[Any]) -> float:
    times = []
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                model(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 10)
    return sorted(times)[1]


def _compare(i: int, o: torch.Tensor, a: torch.Tensor, r: torch.Tensor, r64: torch.Tensor) -> str:
    """'' when output `i` is right, else what is wrong with it."""
    if o.shape != r.shape or o.dtype != r.dtype:
        return f"output {i}: {tuple(o.shape)} {o.dtype} != {tuple(r.shape)} {r.dtype}"
    if not o.is_floating_point():
        if not torch.equal(o, r) or not torch.equal(o, a):
            wrong = int((o != r).sum())
            return f"output {i}: {wrong} of {o.numel()} indices differ from PyTorch's"
        return ""
    if not torch.allclose(o, r, atol=1e-4, rtol=1e-4, equal_nan=True):
        return f"output {i}: max abs err {float((o - r).abs().nan_to_num(0.0).max()):.3g}"
    if not torch.allclose(o, a, atol=1e-5, rtol=1e-5, equal_nan=True):
        return f"output {i}: two calls differ"
    if not torch.equal(torch.isnan(o), torch.isnan(r)) or not torch.equal(torch.isinf(o), torch.isinf(r)):
        return f"output {i}: NaN / inf positions differ"
    ours, theirs = _relative_error(o, r64), _relative_error(r, r64)
    if ours > max(1e-5, 16 * theirs):
        return f"output {i}: imprecise, {ours:.3g} vs {theirs:.3g}"
    return ""


def run_case(entry: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Correctness (and for suite problems, speed) of one program; the program builds at import."""
    result: dict[str, Any] = {"label": entry["label"], "status": "passed", "message": ""}
    ref_ns = runpy.run_path(str(folder / entry["problem"]))
    ns = runpy.run_path(str(folder / entry["program"]))
    init = ref_ns["get_init_inputs"]()
    torch.manual_seed(42)
    ref = ref_ns["Model"](*init).cuda()
    torch.manual_seed(42)
    new = ns["ModelNew"](*init).cuda()
    ref64 = copy.deepcopy(ref).double()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref_ns["get_inputs"]()]
    with torch.no_grad():
        got, again, expected = new(*inputs), new(*inputs), ref(*inputs)
        expected64 = ref64(
            *[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        )
    torch.cuda.synchronize()
    rows = zip(_leaves(got), _leaves(again), _leaves(expected), _leaves(expected64), strict=True)
    for i, (o, a, r, r64) in enumerate(rows):
        message = _compare(i, o, a, r, r64)
        if message:
            return {**result, "status": "wrong_output", "message": message}
    del got, again, expected, expected64, ref64
    if entry["timed"]:
        result["ours_ms"], result["eager_ms"] = _median_ms(new, inputs), _median_ms(ref, inputs)
        with torch.no_grad():
            out_bytes = sum(t.numel() * t.element_size() for t in _leaves(new(*inputs)))
        in_bytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
        result["ours_gbps"] = (in_bytes + out_bytes) / result["ours_ms"] / 1e6
    return result


def _build(program: Path, env: dict[str, str]) -> tuple[str, str]:
    code = f"import runpy; runpy.run_path({str(program)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    return program.name, "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1]


def test_axis_programs_match_pytorch_and_float64() -> None:
    ready = os.environ.get("STITCH_AXIS_PROGRAMS")
    work = Path(tempfile.mkdtemp(prefix="stitch-axis-gpu-"))
    folder = Path(ready) if ready else work / "programs"
    manifest = json.loads((folder / "manifest.json").read_text()) if ready else write_programs(folder)
    only = os.environ.get("STITCH_AXIS_ONLY", "")
    manifest = [m for m in manifest if only in m["label"]]
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(work / "extensions"))
    env = dict(os.environ, MAX_JOBS="4")
    with ThreadPoolExecutor(int(os.environ.get("STITCH_AXIS_JOBS", "8"))) as pool:
        builds = dict(pool.map(lambda m: _build(folder / m["program"], env), manifest))
    results = []
    for m in manifest:
        error = builds.get(m["program"], "")
        if error:
            results.append({"label": m["label"], "status": "build_failed", "message": error[:200]})
            continue
        try:
            results.append(run_case(m, folder))
        except Exception as exc:  # one case's failure is its own row
            results.append(
                {"label": m["label"], "status": "error", "message": f"{type(exc).__name__}: {exc}"[:300]}
            )
        torch.cuda.empty_cache()
    print(f"\n{'case':44s} {'status':14s} {'ours ms':>8s} {'eager ms':>8s} {'GB/s':>6s}  message")
    for r in results:

        def f(key: str, fmt: str, r: dict[str, Any] = r) -> str:
            return format(r[key], fmt) if key in r else "-"

        print(
            f"{r['label']:44s} {r['status']:14s} {f('ours_ms', '8.3f'):>8s} {f('eager_ms', '8.3f'):>8s} "
            f"{f('ours_gbps', '6.0f'):>6s}  {r['message']}"
        )
    sink = os.environ.get("STITCH_AXIS_RESULTS")
    if sink:
        Path(sink).write_text("".join(json.dumps(r) + "\n" for r in results))
    uncovered = [m["label"] for m in manifest if m["uncovered"]]
    assert not uncovered, f"programs leaving ops to PyTorch: {uncovered}"
    failed = [r for r in results if r["status"] != "passed"]
    assert not failed, failed


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--write", type=Path, required=True, help="CPU: write programs and manifest.json here"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    written = write_programs(args.write)
    print(f"wrote {len(written)} programs to {args.write}")
