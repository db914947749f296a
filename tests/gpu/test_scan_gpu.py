"""On a GPU: the offline policy's scan programs against float64 PyTorch, and their speed.

Cases: one program holding every scan variant at odd sizes (rows shorter than a warp's chunk, rows
that are not a multiple of 4, multi-tile rows with look-back, one row of 2^24 elements, a middle and
a first dim, cumprod, reverse, bool masks, an exclusive epilogue, a prologue whose result is also
stored; a second program), the same programs as a CUDA graph (the look-back scratch is allocated stream-ordered inside
the capture) and at demotion level 1, and every scan problem of evals/suite at full size. Each
case checks allclose(atol=rtol=1e-4) against the fp32 reference, the normalised error against a
float64 reference within max(1e-5, 16 x the fp32 reference's own), and two calls agreeing; suite
problems are then timed against eager (CUDA events, median of 3 x 10 calls) with the bandwidth
reached.

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_scan_gpu.py --write out/scan-gpu
and run there (out/scan-gpu carried) with
  bash evals/device/scan_gpu.sh      (= STITCH_SCAN_PROGRAMS=out/scan-gpu pytest -q -s this file)
Knobs: STITCH_SCAN_ONLY=substring of labels, STITCH_SCAN_JOBS=parallel builds (default 8),
STITCH_SCAN_RESULTS=file (the table's rows as JSON lines).
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

VARIANTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, odd, wide, huge, short, near1, bmask, smask, small, cube, tall):
        return (
            torch.cumsum(odd, dim=1),
            torch.cumsum(wide, 1),
            torch.cumsum(huge, -1),
            torch.cumsum(short, 1),
            torch.cumprod(near1, 1),
            torch.cumsum(odd.flip(1), 1).flip(1),
            torch.cumprod(near1.flip(1), 1).flip(1),
            torch.cumsum(short.flip(1), 1).flip(1) * 2.0,
            torch.cumsum(odd * bmask, dim=1),
            torch.cumsum(small * smask, dim=1) - small,
            torch.cumsum(odd, dim=1) - odd,
            cube.cumsum(1),
            torch.cumsum(cube.flip(0), 0).flip(0),
            torch.cumprod(tall * 0.02 + 0.99, 0),
        )


def get_inputs():
    odd = torch.rand(3, 100003)
    return [
        odd,
        torch.rand(5, 65536),
        torch.rand(1, 16777216),
        torch.rand(1000, 37),
        torch.rand(64, 5000) * 0.02 + 0.99,
        torch.rand(3, 100003) > 0.5,
        torch.rand(4096, 64) > 0.3,
        torch.rand(4096, 64),
        torch.rand(4, 3000, 33),
        torch.rand(5000, 17),
    ]


def get_init_inputs():
    return []
"""
# Fused prologues need the chain right before the scan (one input: nothing is scheduled in between).
PROLOGUES = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        t = torch.tanh(x * 1.5)
        a = torch.cumsum(t, dim=1) + t
        b = torch.cumprod(x * 0.02 + 0.99, 0)
        c = torch.cumsum(torch.exp(x).flip(1), 1).flip(1)
        return a, b, c


def get_inputs():
    return [torch.rand(4100, 68)]


def get_init_inputs():
    return []
"""
SCAN_NAMES = ("Cumsum", "Cumprod")


def suite_problems() -> list[Path]:
    return [p for p in sorted(SUITE.glob("level[12]/*.py")) if any(n in p.stem for n in SCAN_NAMES)]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    from codegen.emit.assemble import Options, assemble
    from codegen.schedule.plan import analyse
    from graph.artifacts import Task

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "variants.py").write_text(VARIANTS)
    (folder / "prologues.py").write_text(PROLOGUES)
    problems = [("variants", folder / "variants.py", False), ("prologues", folder / "prologues.py", False)]
    activations = REPO / "tests" / "fixtures" / "problems" / "level1" / "40_Activations.py"
    problems += [("activations", activations, False)]  # the added elementwise activations' numerics
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
    diff = float((a.double() - ref64).norm())
    scale = float(ref64.norm())
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
    worst = {"max_abs_err": 0.0, "norm_err": 0.0, "ref_norm_err": 0.0}
    with torch.no_grad():
        got, again, expected = new(*inputs), new(*inputs), ref(*inputs)
        expected64 = ref64(
            *[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        )
    torch.cuda.synchronize()
    rows = zip(_leaves(got), _leaves(again), _leaves(expected), _leaves(expected64), strict=True)
    for i, (o, a, r, r64) in enumerate(rows):
        if o.shape != r.shape:
            return {
                **result,
                "status": "wrong_shape",
                "message": f"output {i}: {tuple(o.shape)} != {tuple(r.shape)}",
            }
        worst["max_abs_err"] = max(worst["max_abs_err"], float((o - r).abs().max()))
        # Both errors against float64 first, so a miss says whose rounding it is.
        ours, theirs = _relative_error(o, r64), _relative_error(r, r64)
        worst["norm_err"], worst["ref_norm_err"] = (
            max(worst["norm_err"], ours),
            max(worst["ref_norm_err"], theirs),
        )
        if not torch.allclose(o, r, atol=1e-4, rtol=1e-4):
            return {**result, **worst, "status": "wrong_output", "message": f"output {i}"}
        if not torch.allclose(o, a, atol=1e-4, rtol=1e-4):  # look-back order may differ by a rounding
            return {**result, "status": "nondeterministic", "message": f"output {i}: two calls differ"}
        if ours > max(1e-5, 16 * theirs):
            return {
                **result,
                **worst,
                "status": "imprecise",
                "message": f"output {i}: {ours:.3g} vs {theirs:.3g}",
            }
    del got, again, expected, expected64, ref64
    result.update(worst)
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


def test_scan_programs_match_float64_and_time_against_eager() -> None:
    ready = os.environ.get("STITCH_SCAN_PROGRAMS")
    work = Path(tempfile.mkdtemp(prefix="stitch-scan-gpu-"))
    folder = Path(ready) if ready else work / "programs"
    manifest = json.loads((folder / "manifest.json").read_text()) if ready else write_programs(folder)
    only = os.environ.get("STITCH_SCAN_ONLY", "")
    manifest = [m for m in manifest if only in m["label"]]
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(work / "extensions"))
    env = dict(os.environ, MAX_JOBS="4")
    with ThreadPoolExecutor(int(os.environ.get("STITCH_SCAN_JOBS", "8"))) as pool:
        builds = dict(pool.map(lambda m: _build(folder / m["program"], env), manifest))
    torch.backends.cuda.matmul.allow_tf32 = False
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
    print(
        f"\n{'case':42s} {'status':14s} {'max abs':>9s} {'norm err':>9s} {'ref err':>9s} {'ours ms':>8s} "
        f"{'eager ms':>8s} {'GB/s':>6s}  message"
    )
    for r in results:

        def f(key: str, fmt: str, r: dict[str, Any] = r) -> str:
            return format(r[key], fmt) if key in r else "-"

        print(
            f"{r['label']:42s} {r['status']:14s} {f('max_abs_err', '9.2e'):>9s} {f('norm_err', '9.2e'):>9s} "
            f"{f('ref_norm_err', '9.2e'):>9s} {f('ours_ms', '8.3f'):>8s} {f('eager_ms', '8.3f'):>8s} "
            f"{f('ours_gbps', '6.0f'):>6s}  {r['message']}"
        )
    sink = os.environ.get("STITCH_SCAN_RESULTS")
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
