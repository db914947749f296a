"""Where a one-kernel candidate's build time goes, before and after the direct builder.

    python -m evals.benchmarks.build_times OUT_DIR [--n 3] [--styles ours-torch,ours-direct,...]
        [--parallel 1] [--arch sm_90]

Styles: `kb-*` is a KernelBench-style candidate (torch/extension.h in the .cu, `functions=`), `ours-*` is
our program format (a torch-free .cu and a pybind11-only binding); `*-torch` builds with torch's own
load_inline (STITCHCUDA_BUILDER=torch: the "before"), `*-direct` with tools.build's direct builder
(the "after"). Each style gets a fresh cache. Every build runs in a fresh Python process, as in the
worker: N distinct variants cold (different kernel constants, so nothing is shared but the
precompiled header), then each again as a cache hit. For a direct style one extra first build makes
the precompiled header (a one-time cost per machine and flag set) and is reported on its own row.
`--parallel K` runs the cold builds K at a time (independent candidates built at once).

Writes OUT_DIR/build_times.json (every run, its phases, the machine) and prints the summary table
last. Needs only torch, the standard library and this repository's tools/ (no langgraph).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
STYLES = ("kb-torch", "kb-direct", "ours-torch", "ours-direct")

KB_CUDA = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f) * VARIANT_SCALE;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    relu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
KB_CPP = "torch::Tensor relu_cuda(torch::Tensor x);"

OURS_CUDA = r"""
#include <cuda_runtime.h>
#include <cstdint>

__global__ void relu_f4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    v.x = fmaxf(v.x, 0.f) * VARIANT_SCALE; v.y = fmaxf(v.y, 0.f) * VARIANT_SCALE;
    v.z = fmaxf(v.z, 0.f) * VARIANT_SCALE; v.w = fmaxf(v.w, 0.f) * VARIANT_SCALE;
    y[i] = v;
  }
}
extern "C" int stitch_relu(const float* x, float* y, int64_t n, cudaStream_t s) {
  int64_t n4 = n / 4;
  if (n4 > 0) relu_f4<<<(unsigned)((n4 + 255) / 256), 256, 0, s>>>((const float4*)x, (float4*)y, n4);
  return (int)cudaGetLastError();
}
"""
OURS_CPP = r"""
#include <pybind11/pybind11.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
extern "C" int stitch_relu(const float* x, float* y, int64_t n, cudaStream_t s);
static void relu(std::uintptr_t x, std::uintptr_t y, int64_t n, std::uintptr_t stream) {
  int err = stitch_relu(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n,
                        reinterpret_cast<cudaStream_t>(stream));
  if (err != 0) throw std::runtime_error(std::string("relu launch: ") + cudaGetErrorString((cudaError_t)err));
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
"""

BUILD_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from tools import build
spec = json.load(open(sys.argv[1]))
t1 = time.perf_counter()
ok, error = True, ""
try:
    build.cached_load_inline(**spec["kwargs"], cache_dir=spec["cache_dir"], arch=spec["arch"])
except build.BuildError as exc:
    ok, error = False, str(exc)
t2 = time.perf_counter()
records = build.build_records()
record = records[-1].to_dict() if records else {}
print(json.dumps({"ok": ok, "error": error, "seconds": t2 - t1, "startup_s": t1 - t0, "record": record}))
"""


def variant_kwargs(style: str, index: int) -> dict[str, Any]:
    """load_inline arguments of variant `index` of a style (a distinct constant: a distinct program)."""
    scale = f"{1.0 + index / 1000:.4f}f"
    family = style.split("-", 1)[0]
    if family == "kb":
        return {
            "name": f"kb_relu_{index}",
            "cpp_sources": KB_CPP,
            "cuda_sources": KB_CUDA.replace("VARIANT_SCALE", scale),
            "functions": ["relu_cuda"],
        }
    return {
        "name": f"stitch_relu_{index}",
        "cpp_sources": OURS_CPP,
        "cuda_sources": OURS_CUDA.replace("VARIANT_SCALE", scale),
        "extra_cuda_cflags": ["-O3"],
        "no_implicit_headers": True,
    }


def build_once(style: str, index: int, cache: Path, arch: str, work: Path) -> dict[str, Any]:
    """One build in a fresh process; seconds = the load_inline call (build + import, no startup)."""
    spec = {"kwargs": variant_kwargs(style, index), "cache_dir": str(cache), "arch": arch}
    spec_path = work / f"{style}-{index}-{time.monotonic_ns()}.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["STITCHCUDA_BUILDER"] = style.split("-", 1)[1]
    cuda_bin = "/usr/local/cuda/bin"
    if cuda_bin not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = cuda_bin + os.pathsep + env.get("PATH", "")
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", BUILD_SCRIPT, str(spec_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        check=False,
    )
    wall = time.perf_counter() - started
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        result = {"ok": False, "error": (done.stderr or done.stdout)[-2000:], "seconds": None, "record": {}}
    result.update(style=style, index=index, process_wall_s=round(wall, 3))
    record = result.get("record") or {}
    result["cached"] = bool(record.get("cached"))
    result["builder"] = record.get("builder") or ""
    result["phases"] = record.get("phases") or {}
    result.pop("record", None)
    return result


def stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run_style(style: str, n: int, arch: str, out: Path, parallel: int) -> dict[str, Any]:
    cache = out / f"cache-{style}"
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"style": style, "first": None}
    if style == "ours-direct":  # the first build also makes the shared precompiled header
        result["first"] = build_once(style, 1000, cache, arch, work)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        cold = list(pool.map(lambda i: build_once(style, i, cache, arch, work), range(n)))
    result["cold_batch_wall_s"] = round(time.perf_counter() - started, 3)
    result["cold"] = cold
    result["cached"] = [build_once(style, i, cache, arch, work) for i in range(n)]
    return result


def summarize(style_runs: list[dict[str, Any]], parallel: int) -> list[dict[str, Any]]:
    rows = []
    for run in style_runs:
        cold = [r["seconds"] for r in run["cold"] if r["ok"] and not r["cached"]]
        hits = [r["seconds"] for r in run["cached"] if r["ok"] and r["cached"]]
        phases: dict[str, float | None] = {}
        for step in ("nvcc_s", "cxx_s", "link_s", "pch_s"):
            values = [
                r["phases"][step] for r in run["cold"] if isinstance(r["phases"].get(step), int | float)
            ]
            phases[step] = statistics.median(values) if values else None
        first = run.get("first") or {}
        rows.append(
            {
                "style": run["style"],
                "n": len(run["cold"]),
                "failed": sum(1 for r in run["cold"] + run["cached"] if not r["ok"]),
                "cold": stats(cold),
                "cached": stats(hits),
                "cached_process_wall_median": statistics.median([r["process_wall_s"] for r in run["cached"]])
                if run["cached"]
                else None,
                "first_build_with_pch_s": first.get("seconds"),
                "pch_used": _pch_state(run),
                "phases_median": phases,
                "builders": sorted({r.get("builder", "") for r in run["cold"] if r["ok"]}),
                "cold_batch_wall_s": run["cold_batch_wall_s"],
                "parallel": parallel,
            }
        )
    return rows


def _pch_state(run: dict[str, Any]) -> str | None:
    """'yes' when every cold build read the shared header, 'off' when none wanted one (torch headers)."""
    if not run["style"].endswith("-direct"):
        return None
    states = {
        r["phases"].get("pch_used", "off" if r["phases"].get("pch") == "off" else False) for r in run["cold"]
    }
    if states == {True}:
        return "yes"
    return "off" if states == {"off"} else "NO"


def _f(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| style | builder | n | cold median s | cold min | cold max | cached median s | cached max | "
        "first build (makes PCH) s | nvcc s | c++ s | link s | PCH used | batch wall s (parallel) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = r["phases_median"]
        lines.append(
            f"| {r['style']} | {'+'.join(r.get('builders') or []) or '-'} | "
            f"{r['n']}{' (' + str(r['failed']) + ' failed)' if r['failed'] else ''} | "
            f"{_f(r['cold']['median'])} | {_f(r['cold']['min'])} | {_f(r['cold']['max'])} | "
            f"{_f(r['cached']['median'], '.3f')} | {_f(r['cached']['max'], '.3f')} | "
            f"{_f(r['first_build_with_pch_s'])} | {_f(p['nvcc_s'])} | {_f(p['cxx_s'])} | {_f(p['link_s'])} | "
            f"{r['pch_used'] or '-'} | "
            f"{_f(r['cold_batch_wall_s'], '.1f')} ({r['parallel']}) |"
        )
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    import torch

    def first_line(cmd: list[str]) -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
        except OSError as exc:
            return f"unavailable ({exc})"
        lines = (out.stdout or out.stderr).strip().splitlines()
        return lines[-1] if cmd[-1] == "--version" and "nvcc" in cmd[0] else (lines[0] if lines else "")

    return {
        "host": platform.node(),
        "cpus": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cxx": first_line([os.environ.get("CXX", "c++"), "--version"]),
        "nvcc": first_line(["/usr/local/cuda/bin/nvcc", "--version"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="output folder (build caches, build_times.json)")
    parser.add_argument("--n", type=int, default=3, help="distinct variants per style (default 3)")
    parser.add_argument("--styles", default="ours-torch,ours-direct,kb-torch,kb-direct", help="comma list")
    parser.add_argument("--parallel", type=int, default=1, help="cold builds run at once (default 1)")
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args(argv)
    styles = [s.strip() for s in args.styles.split(",") if s.strip()]
    unknown = [s for s in styles if s not in STYLES]
    if unknown:
        parser.error(f"unknown style(s) {unknown}; choose from {', '.join(STYLES)}")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for style in styles:
        print(
            f"[build_times] {style}: {args.n} cold + {args.n} cached builds ...", file=sys.stderr, flush=True
        )
        runs.append(run_style(style, args.n, args.arch, out, args.parallel))
    rows = summarize(runs, args.parallel)
    report = {"machine": machine(), "args": vars(args), "summary": rows, "runs": runs}
    (out / "build_times.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "build_times.md").write_text(table(rows) + "\n")
    print(f"machine: {json.dumps(report['machine'])}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
