"""On a GPU: every suite problem's offline program is built, run and compared with the reference.

Plans and programs are written in this process; each program is then built in parallel (build-only
subprocesses) and run in its own fresh process, one at a time, with KernelBench's checks: both
models built after `manual_seed(42)`, several input draws, `allclose(atol=rtol=1e-4)`. A one-line
table per problem is printed (status, error, eager and candidate time from a short CUDA-event loop).

Knobs (environment): STITCH_GPU_SUITE=folder (default evals/suite, else tests/fixtures/problems),
STITCH_GPU_ONLY=substring, STITCH_GPU_VARIANTS=1 to also check the fix-mode 'split' variant and the
CUDA-graph variant of each program, STITCH_GPU_JOBS=parallel builds (default 6),
STITCH_GPU_RUN_JOBS=problems run at once (default 3; use 1 for undisturbed timings: with several
at once the times in the table are only indicative).

The GPU machine has no pydantic (which codegen's artifacts need): write the programs on the CPU
machine with `python tests/gpu/test_codegen_gpu.py --write DIR [--variants]` and run there with
STITCH_GPU_PROGRAMS=DIR; then this test imports only torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

# Runs in a fresh interpreter with torch only: build (import the program), then optionally check.
RUNNER = r"""
import json, runpy, sys, time, traceback
import torch
program, problem, mode = sys.argv[1], sys.argv[2], sys.argv[3]
result = {"status": "passed", "message": ""}
try:
    t0 = time.time()
    ns = runpy.run_path(program)
    result["build_s"] = round(time.time() - t0, 1)
    if mode == "run":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        ref_ns = runpy.run_path(problem)
        init = ref_ns["get_init_inputs"]()
        torch.manual_seed(42); torch.cuda.manual_seed(42)
        ref = ref_ns["Model"](*init).cuda()
        torch.manual_seed(42); torch.cuda.manual_seed(42)
        new = ns["ModelNew"](*init).cuda()
        worst = 0.0
        for seed in (1, 2, 3):
            torch.manual_seed(seed)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref_ns["get_inputs"]()]
            with torch.no_grad():
                expected = ref(*inputs)
                got = new(*inputs)
            torch.cuda.synchronize()
            if tuple(got.shape) != tuple(expected.shape):
                result.update(status="wrong_output", message=f"shape {tuple(got.shape)} != {tuple(expected.shape)}")
                break
            err = (got - expected).abs()
            worst = max(worst, float(err.max()))
            if not torch.allclose(got, expected, atol=1e-4, rtol=1e-4):
                bad = (err > 1e-4 + 1e-4 * expected.abs()).nonzero()[0].tolist()
                result.update(status="wrong_output", message=f"trial {seed}: max abs err {float(err.max()):.3g} at {bad}")
                break
        result["max_abs_err"] = worst
        if result["status"] == "passed":
            def clock(model):
                with torch.no_grad():
                    for _ in range(3):
                        model(*inputs)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    torch.cuda.synchronize()
                    start.record()
                    for _ in range(10):
                        model(*inputs)
                    end.record()
                    torch.cuda.synchronize()
                return start.elapsed_time(end) / 10
            result["eager_ms"] = clock(ref)
            result["ours_ms"] = clock(new)
except Exception as exc:  # report, do not crash the table
    result.update(status="runtime_error", message=f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}")
    result["trace"] = traceback.format_exc()[-2000:]
print("STITCH_RESULT " + json.dumps(result))
"""


def suite_files() -> list[Path]:
    root = Path(os.environ.get("STITCH_GPU_SUITE", REPO / "evals" / "suite"))
    files = sorted(root.glob("level*/*.py"))
    if not files:
        files = sorted((REPO / "tests" / "fixtures" / "problems").glob("level*/*.py"))
    only = os.environ.get("STITCH_GPU_ONLY", "")
    return [f for f in files if only in str(f)]


def _arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def _programs(
    work: Path, arch: str | None = None, variants: bool | None = None
) -> list[tuple[str, Path, Path, str]]:
    """(label, program, problem, templates) for every problem and variant, written under `work`."""
    ready = os.environ.get("STITCH_GPU_PROGRAMS")
    if ready and arch is None:
        manifest = json.loads((Path(ready) / "manifest.json").read_text())
        only = os.environ.get("STITCH_GPU_ONLY", "")
        return [
            (m["label"], Path(ready) / m["program"], Path(ready) / m["problem"], m["templates"])
            for m in manifest
            if only in m["label"]
        ]
    from codegen.emit.assemble import Options, assemble
    from codegen.policy import OfflinePolicy
    from codegen.schedule.plan import analyse
    from graph.artifacts import Task
    from graph.context import Context

    arch = arch or _arch()
    policy = OfflinePolicy(Context(gpu_arch=arch))
    if variants is None:
        variants = os.environ.get("STITCH_GPU_VARIANTS") == "1"
    out: list[tuple[str, Path, Path, str]] = []
    for path in suite_files():
        task = Task(name=path.stem, path=str(path), source=path.read_text(), level=path.parent.name)
        plan = policy.plan(task, None)
        candidate = policy.write(task, plan, 1)
        label = f"{path.parent.name}/{path.stem}"
        programs = [
            (label, candidate.source, ",".join(f"{k}:{v}" for k, v in candidate.meta["templates"].items()))
        ]
        if variants:
            analysis = analyse(task)
            split = assemble(analysis, Options(arch=arch, levels={g.id: 1 for g in analysis.groups}))
            graph = assemble(analysis, Options(arch=arch, cuda_graph=analysis.ok))
            programs += [
                (f"{label} [split]", split.source, "split"),
                (f"{label} [graph]", graph.source, "graph"),
            ]
        problem = work / f"{path.parent.name}_{path.stem}_problem.py"
        problem.write_text(path.read_text())
        for i, (name, source, templates) in enumerate(programs):
            file = work / f"{path.parent.name}_{path.stem}_{i}.py"
            file.write_text(source)
            out.append((name, file, problem, templates))
    return out


def write_programs(folder: Path, arch: str, variants: bool) -> None:
    """CPU side: write every program, its problem and a manifest for STITCH_GPU_PROGRAMS."""
    folder.mkdir(parents=True, exist_ok=True)
    programs = _programs(folder, arch=arch, variants=variants)
    manifest = [
        {"label": label, "program": program.name, "problem": problem.name, "templates": templates}
        for label, program, problem, templates in programs
    ]
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"wrote {len(manifest)} programs to {folder}")


def _run(program: Path, problem: Path, mode: str, env: dict[str, str]) -> dict[str, object]:
    try:
        proc = subprocess.run(
            [sys.executable, "-c", RUNNER, str(program), str(problem), mode],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": "no answer in 900 s"}
    for line in proc.stdout.splitlines():
        if line.startswith("STITCH_RESULT "):
            return json.loads(line[len("STITCH_RESULT ") :])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"status": "crashed", "message": f"rc={proc.returncode}: {tail[0][:200]}"}


def test_offline_programs_match_the_reference_on_gpu() -> None:
    work = Path(tempfile.mkdtemp(prefix="stitch-gpu-"))
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(work / "extensions"))
    env.setdefault("MAX_JOBS", "4")
    programs = _programs(work)
    jobs = int(os.environ.get("STITCH_GPU_JOBS", "6"))
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # builds only touch the CPU
        built = list(pool.map(lambda p: _run(p[1], p[2], "build", env), programs))

    def check(item: tuple[tuple[str, Path, Path, str], dict[str, object]]) -> dict[str, object]:
        (_, program, problem, _), build = item
        result = _run(program, problem, "run", env) if build["status"] == "passed" else build
        result.setdefault("build_s", build.get("build_s"))
        return result

    with ThreadPoolExecutor(max_workers=int(os.environ.get("STITCH_GPU_RUN_JOBS", "3"))) as pool:
        results = list(pool.map(check, zip(programs, built, strict=True)))
    rows = [(p[0], r, p[3]) for p, r in zip(programs, results, strict=True)]
    print()
    print(
        f"{'problem':44s} {'status':13s} {'max_err':>9s} {'eager_ms':>9s} {'ours_ms':>9s} {'speedup':>7s} {'build_s':>7s}  groups"
    )
    for label, r, templates in rows:
        eager, ours = r.get("eager_ms"), r.get("ours_ms")
        speed = f"{eager / ours:7.2f}" if eager and ours else "      -"
        err = f"{r['max_abs_err']:9.2e}" if isinstance(r.get("max_abs_err"), float) else "        -"
        e = f"{eager:9.3f}" if eager else "        -"
        o = f"{ours:9.3f}" if ours else "        -"
        print(
            f"{label:44s} {r['status']:13s} {err} {e} {o} {speed} {str(r.get('build_s') or '-'):>7s}  {templates[:120]}"
        )
        if r["status"] != "passed":
            print(f"    -> {r.get('message', '')}")
            if r.get("trace"):
                print("       " + str(r["trace"]).replace("\n", "\n       ")[-1500:])
    failed = [label for label, r, _ in rows if r["status"] != "passed"]
    assert not failed, f"{len(failed)}/{len(rows)} failed: {failed}"


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="write offline programs for the GPU check")
    parser.add_argument("--write", required=True, type=Path, help="output folder")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--variants", action="store_true", help="also the split and CUDA-graph variants")
    options = parser.parse_args()
    write_programs(options.write, options.arch, options.variants)
