"""On a GPU: the copy family's programs (cat / stack / contiguous / clone / tril / triu / fills) and
the masked-fill and tensor-clamp elementwise ops against float64 PyTorch, and their speed.

Cases: tests/fixtures/problems/level2/31_Copy_Families.py (every variant at odd sizes: parts that are
not multiples of 4, a channel shuffle, a causal mask from a registered buffer fused into a softmax,
broadcast clamp bounds) as planned, as a CUDA graph and at demotion level 1; then every copy problem
of evals/suite at full size, timed against eager. The checks and the table are test_scan_gpu.py's
(allclose 1e-4 against fp32, the error against float64 within max(1e-5, 16 x the fp32 reference's
own), two calls agreeing).

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_copy_gpu.py --write out/copy-gpu
and run there (out/copy-gpu carried) with
  STITCH_COPY_PROGRAMS=out/copy-gpu python -m pytest -q -s tests/gpu/test_copy_gpu.py
Knobs: STITCH_COPY_ONLY=substring of labels, STITCH_COPY_RESULTS=file (rows as JSON lines).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_scan_gpu import _build, run_case  # noqa: E402  (the same checks and timing)

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evals" / "suite"
FAMILIES = REPO / "tests" / "fixtures" / "problems" / "level2" / "31_Copy_Families.py"
COPY_NAMES = ("Concat", "Tril", "Shuffle", "CausalMask", "DenseBlock", "Inception", "MiniGPT")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def suite_problems() -> list[Path]:
    return [p for p in sorted(SUITE.glob("level[123]/*.py")) if any(n in p.stem for n in COPY_NAMES)]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    from codegen.emit.assemble import Options, assemble
    from codegen.schedule.plan import analyse
    from graph.artifacts import Task

    folder.mkdir(parents=True, exist_ok=True)
    problems = [("families", FAMILIES, False)] + [(p.stem, p, True) for p in suite_problems()]
    manifest: list[dict[str, Any]] = []
    for label, path, timed in problems:
        analysis = analyse(Task(name=path.stem, path=str(path), source=path.read_text()))
        groups = [s.group.id for s in analysis.steps if s.group is not None and s.group.covered]
        variants = [("", Options(arch=arch))]
        if not timed:
            variants += [(" graph", Options(arch=arch, cuda_graph=True))]
            variants += [(" split", Options(arch=arch, levels={g: 1 for g in groups}))]
        (folder / path.name).write_text(path.read_text())
        for suffix, options in variants:
            program = assemble(analysis, options)
            name = f"{path.stem}{suffix.replace(' ', '_')}_program.py"
            (folder / name).write_text(program.source)
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


def test_copy_programs_match_float64_and_time_against_eager() -> None:
    ready = os.environ.get("STITCH_COPY_PROGRAMS")
    work = Path(tempfile.mkdtemp(prefix="stitch-copy-gpu-"))
    folder = Path(ready) if ready else work / "programs"
    manifest = json.loads((folder / "manifest.json").read_text()) if ready else write_programs(folder)
    only = os.environ.get("STITCH_COPY_ONLY", "")
    manifest = [m for m in manifest if only in m["label"]]
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(work / "extensions"))
    env = dict(os.environ, MAX_JOBS="4")
    with ThreadPoolExecutor(8) as pool:
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
        f"\n{'case':40s} {'status':14s} {'max abs':>9s} {'norm err':>9s} {'ours ms':>8s} {'eager ms':>8s}  message"
    )
    for r in results:

        def f(key: str, fmt: str, r: dict[str, Any] = r) -> str:
            return format(r[key], fmt) if key in r else "-"

        print(
            f"{r['label']:40s} {r['status']:14s} {f('max_abs_err', '9.2e'):>9s} {f('norm_err', '9.2e'):>9s} "
            f"{f('ours_ms', '8.3f'):>8s} {f('eager_ms', '8.3f'):>8s}  {r['message']}"
        )
    sink = os.environ.get("STITCH_COPY_RESULTS")
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
