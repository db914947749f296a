"""The shared harness of the op-family GPU numerics tests (scan, axis, copy, ...).

Why shared: every family test writes its programs on the CPU (codegen needs pydantic, which the GPU
machine lacks), builds them in parallel there, loads each program beside its reference, compares
against fp32 PyTorch and a float64 twin, times the suite problems against eager and prints one
table. Only the cases and the comparison rules differ per family; the rest lives here once.
Knobs per family PREFIX (SCAN, AXIS, COPY): STITCH_<PREFIX>_PROGRAMS (programs written with
--write), _ONLY (substring of labels), _JOBS (parallel builds), _RESULTS (the rows as JSON lines).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import runpy
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

# (label, problem file, timed): timed ones are suite problems, the others fixtures also written as a
# CUDA graph and at demotion level 1.
Problem = tuple[str, Path, bool]
COLUMNS = (  # (key, header, width, format): a row shows "-" where its family does not measure it
    ("max_abs_err", "max abs", 9, "9.2e"),
    ("norm_err", "norm err", 9, "9.2e"),
    ("ref_norm_err", "ref err", 9, "9.2e"),
    ("ours_ms", "ours ms", 8, "8.3f"),
    ("eager_ms", "eager ms", 8, "8.3f"),
    ("ours_gbps", "GB/s", 6, "6.0f"),
)


def write_family_programs(
    folder: Path, problems: Sequence[Problem], arch: str = "sm_90"
) -> list[dict[str, Any]]:
    """Each problem's program (plus graph and split variants for fixtures, graph and side-stream variants
    where the forward has independent branches), the problem files and
    manifest.json in `folder`; needs codegen (the CPU machine)."""
    from codegen.emit.assemble import Options, assemble
    from codegen.schedule.plan import analyse
    from codegen.schedule.streams import branch_streams
    from graph.artifacts import Task

    folder.mkdir(parents=True, exist_ok=True)
    manifest: list[dict[str, Any]] = []
    for label, path, timed in problems:
        analysis = analyse(Task(name=path.stem, path=str(path), source=path.read_text()))
        groups = [s.group.id for s in analysis.steps if s.group is not None and s.group.covered]
        variants = [("", Options(arch=arch))]
        if not timed:
            variants += [(" graph", Options(arch=arch, cuda_graph=True))]
            variants += [(" split", Options(arch=arch, levels={g: 1 for g in groups}))]
        inputs = [n for n in analysis.traced.graph.nodes if n.op == "placeholder"] if analysis.traced else []
        if analysis.ok and branch_streams(analysis.steps, inputs) > 1:  # branches: with and without
            if timed:  # a fixture has its graph variant already
                variants.append((" graph", Options(arch=arch, cuda_graph=True)))
            variants.append((" streams", Options(arch=arch, cuda_graph=True, streams=True)))
        if path.parent != folder:
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


def leaves(value: Any) -> list[torch.Tensor]:
    """The tensors of a (nested) output, in order; non-tensor items are not outputs to compare."""
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in leaves(v)] if isinstance(value, (tuple, list)) else []


def relative_error(a: torch.Tensor, ref64: torch.Tensor) -> float:
    """||a - ref64|| / ||ref64|| over the reference's finite elements."""
    finite = torch.isfinite(ref64)
    diff = float((a.double() - ref64)[finite].norm())
    scale = float(ref64[finite].norm())
    return diff / scale if scale > 0 else diff


def median_ms(model: Any, inputs: list[Any]) -> float:
    """The middle of three CUDA-event timings of 10 calls each (after 3 warm-up calls)."""
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                model(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 10)
    return sorted(times)[1]


def load_case(entry: dict[str, Any], folder: Path) -> tuple[Any, Any, Any, list[Any]]:
    """(reference, program, float64 reference, inputs) on the GPU, seeded as the harness seeds them;
    the program builds at import."""
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
    return ref, new, ref64, inputs


def outputs(ref: Any, new: Any, ref64: Any, inputs: list[Any]) -> list[tuple[torch.Tensor, ...]]:
    """Per output: (ours, ours again, fp32 reference, float64 reference)."""
    with torch.no_grad():
        got, again, expected = new(*inputs), new(*inputs), ref(*inputs)
        doubled = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        expected64 = ref64(*doubled)
    torch.cuda.synchronize()
    return list(zip(leaves(got), leaves(again), leaves(expected), leaves(expected64), strict=True))


def timing_fields(ref: Any, new: Any, inputs: list[Any]) -> dict[str, float]:
    """Ours and eager's median times and the bandwidth ours reached (inputs read + outputs written)."""
    ours, eager = median_ms(new, inputs), median_ms(ref, inputs)
    with torch.no_grad():
        out_bytes = sum(t.numel() * t.element_size() for t in leaves(new(*inputs)))
    in_bytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    return {"ours_ms": ours, "eager_ms": eager, "ours_gbps": (in_bytes + out_bytes) / ours / 1e6}


def check_case(entry: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The common checks of one program (the program builds at import): allclose 1e-4 against fp32
    PyTorch, two calls agreeing, the error against float64 within max(1e-5, 16 x the fp32 reference's
    own); suite problems are also timed against eager."""
    result: dict[str, Any] = {"label": entry["label"], "status": "passed", "message": ""}
    ref, new, ref64, inputs = load_case(entry, folder)
    worst = {"max_abs_err": 0.0, "norm_err": 0.0, "ref_norm_err": 0.0}
    rows = outputs(ref, new, ref64, inputs)
    for i, (o, a, r, r64) in enumerate(rows):
        if o.shape != r.shape:
            return {
                **result,
                "status": "wrong_shape",
                "message": f"output {i}: {tuple(o.shape)} != {tuple(r.shape)}",
            }
        worst["max_abs_err"] = max(worst["max_abs_err"], float((o - r).abs().max()))
        # Both errors against float64 first, so a miss says whose rounding it is.
        ours, theirs = relative_error(o, r64), relative_error(r, r64)
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
    del rows, ref64
    result.update(worst)
    if entry["timed"]:
        result.update(timing_fields(ref, new, inputs))
    return result


def build_program(program: Path, env: dict[str, str]) -> tuple[str, str]:
    """(program name, '' or the build's last error line): importing the program builds it."""
    code = f"import runpy; runpy.run_path({str(program)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    return program.name, "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1]


def run_family(
    prefix: str,
    write_programs: Callable[[Path], list[dict[str, Any]]],
    run_case: Callable[[dict[str, Any], Path], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Build every program, run every case (one case's failure is its own row), print the table,
    then assert that no program leaves an op to PyTorch and that every case passed."""
    ready = os.environ.get(f"STITCH_{prefix}_PROGRAMS")
    work = Path(tempfile.mkdtemp(prefix=f"stitch-{prefix.lower()}-gpu-"))
    folder = Path(ready) if ready else work / "programs"
    manifest = json.loads((folder / "manifest.json").read_text()) if ready else write_programs(folder)
    only = os.environ.get(f"STITCH_{prefix}_ONLY", "")
    manifest = [m for m in manifest if only in m["label"]]
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(work / "extensions"))
    env = dict(os.environ, MAX_JOBS="4")
    with ThreadPoolExecutor(int(os.environ.get(f"STITCH_{prefix}_JOBS", "8"))) as pool:
        builds = dict(pool.map(lambda m: build_program(folder / m["program"], env), manifest))
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
    print_table(results)
    sink = os.environ.get(f"STITCH_{prefix}_RESULTS")
    if sink:
        Path(sink).write_text("".join(json.dumps(r) + "\n" for r in results))
    uncovered = [m["label"] for m in manifest if m["uncovered"]]
    assert not uncovered, f"programs leaving ops to PyTorch: {uncovered}"
    failed = [r for r in results if r["status"] != "passed"]
    assert not failed, failed
    return results


def print_table(results: Sequence[dict[str, Any]]) -> None:
    header = " ".join(f"{title:>{width}s}" for _, title, width, _ in COLUMNS)
    print(f"\n{'case':44s} {'status':14s} {header}  message")
    for r in results:
        cells = " ".join(
            f"{format(r[key], fmt) if key in r else '-':>{width}s}" for key, _, width, fmt in COLUMNS
        )
        print(f"{r['label']:44s} {r['status']:14s} {cells}  {r['message']}")


def write_main(doc: str | None, write_programs: Callable[[Path], list[dict[str, Any]]]) -> None:
    """The CPU side of a family test: `python tests/gpu/test_X_gpu.py --write DIR`."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument(
        "--write", type=Path, required=True, help="CPU: write programs and manifest.json here"
    )
    args = parser.parse_args()
    written = write_programs(args.write)
    print(f"wrote {len(written)} programs to {args.write}")
