"""System-level profile of a program's forward: GPU busy %, launches, gaps, host syncs, copies, top kernels.

Why: a kernel can be fast while the program is slow. Launch overhead, host synchronisation and
host<->device copies between kernels are invisible to a per-kernel profiler; they show on the
timeline. Two sources give the same timeline here: Nsight Systems (`tools.profilers.nsys`, preferred) and the
PyTorch profiler's Chrome trace (the fallback where nsys is absent or cannot report). Both are read
into the same records and `summarize` turns them into one summary dict (tools.profilers.timeline),
whose `source` names the tool. Everything is per forward: the driver (`tools.profilers.target`) runs
`iters` forwards inside one named range, and only the GPU work launched from inside that range counts.

`system_profile(problem_source, candidate_source)` is the one entry point: nsys when it exists and
reports, else the PyTorch profiler, else a summary with status "unavailable" and the reason. Standard
library only (the profiled program runs in a child process, which imports torch).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.profilers import nsys
from tools.profilers.timeline import format_summary, summarize, timeline_from_chrome_trace, unavailable
from tools.profilers.tool_run import (
    DEFAULT_ITERS,
    DEFAULT_WARMUP,
    DriverFiles,
    driver_command,
    driver_env,
    meta_failure,
    read_meta,
    run_tool,
)

__all__ = ["format_summary", "system_profile", "torch_profile"]  # format_summary: the summary's one-line form


def torch_profile(
    problem_source: str,
    candidate_source: str | None,
    *,
    target: str | None = None,
    iters: int = DEFAULT_ITERS,
    warmup: int = DEFAULT_WARMUP,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    timeout_s: float = 300.0,
    keep_dir: str | os.PathLike[str] | None = None,
    python: str = sys.executable,
) -> dict[str, Any]:
    """The system summary from the PyTorch profiler (the driver exports a Chrome trace)."""
    target = target or ("candidate" if candidate_source is not None else "reference")
    directory = Path(keep_dir) if keep_dir else Path(tempfile.mkdtemp(prefix="stitch-torchprof-"))
    try:
        files = DriverFiles.write(directory, problem_source, candidate_source, f"torch-{target}")
        trace = directory / f"torch-{target}.trace.json"
        command = driver_command(
            files, target=target, mode="torch", iters=iters, warmup=warmup, arch=arch, cache_dir=cache_dir,
            trace=trace, python=python,
        )  # fmt: skip
        run = run_tool(
            command,
            timeout_s=timeout_s,
            cwd=directory,
            env=driver_env(directory),
            sandbox="driver",
            cache_dir=cache_dir,
        )
        meta = read_meta(files.meta)
        if meta.get("status") == "no_gpu":
            return unavailable("torch_profiler", target, "no CUDA device", status="no_gpu")
        failure = meta_failure(meta, run)
        if failure is not None:
            return unavailable("torch_profiler", target, failure, status="failed")
        try:
            timeline = timeline_from_chrome_trace(trace.read_text())
        except (OSError, ValueError) as exc:
            return unavailable("torch_profiler", target, f"cannot read the trace: {exc}", status="failed")
        return summarize(
            timeline,
            source="torch_profiler",
            target=target,
            iters=int(meta.get("iters", iters)),
            own_kernels=meta.get("own_kernels", []),
            device=str(meta.get("device", "")),
        )
    finally:
        if not keep_dir:
            shutil.rmtree(directory, ignore_errors=True)


def system_profile(
    problem_source: str,
    candidate_source: str | None = None,
    *,
    tool: str = "auto",
    iters: int = DEFAULT_ITERS,
    warmup: int = DEFAULT_WARMUP,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    timeout_s: float = 300.0,
    keep_dir: str | os.PathLike[str] | None = None,
    python: str = sys.executable,
) -> dict[str, Any]:
    """Profile the candidate (or the reference, when `candidate_source` is None) at system level.

    tool: "nsys", "torch" or "auto" (nsys when found and it reports; else the PyTorch profiler). The
    summary's `source` names the tool that produced it and, after a fallback, `fallback_reason` says
    why nsys was not used. Never raises for the program's or the tool's sake.
    """
    target = "candidate" if candidate_source is not None else "reference"
    common: dict[str, Any] = dict(
        iters=iters, warmup=warmup, arch=arch, cache_dir=cache_dir, timeout_s=timeout_s, python=python
    )
    why_not = ""
    if tool in ("auto", "nsys"):
        keep = Path(keep_dir) / "nsys" if keep_dir else None
        summary = nsys.profile_system(
            problem_source, candidate_source, target=target, keep_dir=keep, **common
        )
        if summary.get("status") == "ok" or tool == "nsys" or summary.get("status") == "no_gpu":
            return summary
        why_not = f"nsys: {summary.get('reason', summary.get('status'))}"
    keep = Path(keep_dir) / "torch" if keep_dir else None
    summary = torch_profile(problem_source, candidate_source, target=target, keep_dir=keep, **common)
    if why_not:
        summary["fallback_reason"] = why_not
    return summary
