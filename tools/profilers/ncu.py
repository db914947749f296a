"""Nsight Compute: a compact, diagnosis-oriented metric set per kernel, parsed into typed records.

    ncu --clock-control none --profile-from-start off --launch-count N \
        --section SpeedOfLight --section LaunchStats --section Occupancy --metrics <extras> \
        --export REP python -m tools.profilers.target ...
    ncu --import REP.ncu-rep --csv --page raw --print-units base

Why this set: it answers the questions a diagnosis asks of each kernel and no more (every extra
metric costs replay passes). Throughput vs peak (is it memory- or compute-bound, or neither:
latency-bound), occupancy achieved vs theoretical and what limits it (registers, shared memory),
cache hit rates, sectors per request and bytes used per sector for global loads and stores
(coalescing), shared-memory bank conflicts, local-memory traffic (spills), the warp-stall reasons,
tensor-pipe and FMA-pipe activity, branch uniformity. The three sections always exist; the extra
metrics are checked against `ncu --query-metrics` of the installed ncu first (a wrong name makes ncu
refuse the whole run) and a name ncu still rejects is dropped and the run retried once. The metric
set and the records live in tools.profilers.ncu_records (re-exported here).

Counters can be refused (ERR_NVGPUCTRPERM, or a sandbox where the profiler library does not load)
and ncu can be missing: every such case is an `NcuResult` with a status and a reason, never an
exception. Standard library only.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from tools.profilers.ncu_records import (
    DEFAULT_LAUNCH_COUNT,
    EXTRA_METRICS,
    FIELD_METRICS,
    SECTIONS,
    STALL_REASONS,
    KernelMetrics,
    NcuResult,
    kernel_groups,
    missing_fields,
    parse_raw_csv,
    parse_records,
    stall_metric,
)
from tools.profilers.tool_run import DriverFiles, driver_command, driver_env, read_meta, run_tool

__all__ = [  # the records are reached through this module too
    "DEFAULT_LAUNCH_COUNT",
    "EXTRA_METRICS",
    "FIELD_METRICS",
    "STALL_REASONS",
    "KernelMetrics",
    "NcuResult",
    "find_ncu",
    "kernel_groups",
    "parse_raw_csv",
    "parse_records",
    "profile_kernels",
    "stall_metric",
]

NCU_ENV = "STITCHCUDA_NCU"
ALWAYS_PRESENT_PREFIXES = ("launch__", "device__", "profiler__")
MIN_QUERY_NAMES = 50  # a real chip lists well over a thousand base metrics
_SEARCH = (
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/cuda/bin/ncu",
    "/usr/local/cuda/nsight-compute-*/ncu",
)
_METRIC_NAME = re.compile(r"^([a-z][a-z0-9]*__[A-Za-z0-9_]+)")
_BAD_METRIC = re.compile(r"Failed to find metric\s+(?:regex:)?\^?([A-Za-z0-9_.]+)")


def find_ncu() -> str | None:
    """$STITCHCUDA_NCU, `ncu` on PATH, or a known Nsight Compute folder (newest version first)."""
    env = os.environ.get(NCU_ENV)
    if env:
        return env if os.access(env, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in _SEARCH:
        hits = sorted(glob.glob(pattern), reverse=True)
        if hits:
            return hits[0]
    return None


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names from `ncu --query-metrics` (the first word of each table row)."""
    names = set()
    for line in text.splitlines():
        match = _METRIC_NAME.match(line.strip())
        if match:
            names.add(match.group(1))
    return names


def select_metrics(wanted: tuple[str, ...], available: set[str] | None) -> tuple[list[str], list[str]]:
    """(kept, dropped): a metric is kept when its base name is in the chip's list.

    No list, or one too short to be a chip's (a listing format this parser does not know), filters
    nothing: the retry on a rejected name is the safety net then.
    """
    if not available or len(available) < MIN_QUERY_NAMES:
        return list(wanted), []
    kept, dropped = [], []
    for metric in wanted:
        base = metric.split(".")[0]
        if base in available or metric.startswith(ALWAYS_PRESENT_PREFIXES):
            kept.append(metric)
        else:
            dropped.append(metric)
    if len(dropped) > len(wanted) // 2:
        # A listing that lacks most of a diagnosis set every recent chip has is not the chip's full
        # list (ncu 2025.3 on an H200 listed 73 names without --chip): trust the retry instead.
        return list(wanted), []
    return kept, dropped


@functools.cache
def query_metrics(ncu: str) -> frozenset[str]:
    """The base metric names of the attached GPU (empty when ncu cannot say)."""
    run = run_tool([ncu, "--query-metrics"], timeout_s=120)
    return frozenset(parse_query_metrics(run.output)) if run.ok else frozenset()


def classify_failure(output: str) -> tuple[str, str] | None:
    """(status, reason) for the ways ncu refuses to profile, or None when the log shows none."""
    if "ERR_NVGPUCTRPERM" in output:
        return "no_permission", "ncu may not read the GPU performance counters here (ERR_NVGPUCTRPERM)"
    if "LibraryNotLoaded" in output or "Failed to initialize the profiler" in output:
        return "unavailable", "ncu could not start its profiler here (sandboxed GPU: no hardware counters)"
    if "No kernels were profiled" in output:
        return "no_kernels", "ncu profiled no kernels in the driver's range"
    if "Failed to find metric" in output:
        return "failed", "ncu rejected a metric name: " + ", ".join(_BAD_METRIC.findall(output))
    return None


# ----------------------------------------------------------------------------------------------
# Running ncu
# ----------------------------------------------------------------------------------------------


def profile_command(
    ncu: str,
    report: Path,
    metrics: list[str],
    launch_count: int,
    target_command: list[str],
    nvtx_include: str | None = None,
) -> list[str]:
    """The ncu command line: counters only inside the driver's cudaProfilerStart/Stop (or, with
    `nvtx_include`, only inside that NVTX range, e.g. "measure/candidate/"), clocks untouched."""
    window = ["--nvtx", "--nvtx-include", nvtx_include] if nvtx_include else ["--profile-from-start", "off"]
    command = [
        ncu,
        "--clock-control",
        "none",
        *window,
        "--target-processes",
        "all",
        "--launch-count",
        str(launch_count),
    ]
    for section in SECTIONS:
        command += ["--section", section]
    if metrics:
        command += ["--metrics", ",".join(metrics)]
    return command + ["--export", str(report), "--force-overwrite", *target_command]


def export_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"]


def profile_kernels(
    problem_source: str,
    candidate_source: str | None = None,
    *,
    target: str | None = None,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    launch_count: int = DEFAULT_LAUNCH_COUNT,
    timeout_s: float = 300.0,
    keep_dir: str | os.PathLike[str] | None = None,
    ncu: str | None = None,
    available: set[str] | None = None,
    python: str = sys.executable,
) -> NcuResult:
    """Profile one forward of the candidate (or the reference) kernel by kernel; never raises.

    available: the chip's metric names, when the caller already queried them (else ncu is asked).
    keep_dir: keep the report, raw CSV, log and driver files there.
    """
    target = target or ("candidate" if candidate_source is not None else "reference")
    ncu = ncu or find_ncu()
    if ncu is None:
        return NcuResult(
            "unavailable", f"ncu not found (PATH, {NCU_ENV}, /opt/nvidia/nsight-compute)", target
        )
    if available is None:
        available = set(query_metrics(ncu))
    metrics, dropped = select_metrics(EXTRA_METRICS, available)
    directory = Path(keep_dir) if keep_dir else Path(tempfile.mkdtemp(prefix="stitch-ncu-"))
    try:
        files = DriverFiles.write(directory, problem_source, candidate_source, f"ncu-{target}")
        report = directory / f"ncu-{target}.ncu-rep"
        command = driver_command(
            files,
            target=target,
            mode="range",
            iters=1,
            warmup=1,
            arch=arch,
            cache_dir=cache_dir,
            python=python,
        )
        result = NcuResult(
            "failed", target=target, launch_count=launch_count, tool=ncu, metrics_dropped=dropped
        )
        for _attempt in range(2):
            run = run_tool(
                profile_command(ncu, report, metrics, launch_count, command),
                timeout_s=timeout_s,
                cwd=directory,
                env=driver_env(directory),
                log_path=directory / f"ncu-{target}.log",
                sandbox="ncu",
                cache_dir=cache_dir,
            )
            result.seconds += run.seconds
            named = set(_BAD_METRIC.findall(run.output))
            rejected = [m for m in metrics if m in named or m.split(".")[0] in named]
            if not rejected:
                break
            metrics = [m for m in metrics if m not in rejected]
            result.metrics_dropped += rejected
        meta = read_meta(files.meta)
        result.device = str(meta.get("device", ""))
        if run.timed_out:
            result.status, result.reason = "timeout", f"ncu ran past {timeout_s:.0f} s"
            return result
        if meta.get("status") == "no_gpu":
            result.status, result.reason = "no_gpu", "no CUDA device"
            return result
        if run.findings:
            result.reason = "the sandbox refused: " + "; ".join(f["evidence"] for f in run.findings)
            return result
        if meta and meta.get("status") != "ok":
            result.reason = f"the profiled program failed: {meta.get('status')}: {meta.get('message', '')}"
            return result
        refused = classify_failure(run.output)
        if not report.exists():
            status, reason = refused or ("failed", "ncu wrote no report: " + _tail(run.output))
            result.status, result.reason = status, reason
            return result
        raw_csv = directory / f"ncu-{target}.raw.csv"
        run_tool(export_command(ncu, report), timeout_s=120, log_path=raw_csv)
        records = parse_records(raw_csv.read_text(errors="replace"))
        if not records:
            status, reason = refused or ("no_kernels", "the ncu report holds no kernel rows")
            result.status, result.reason = status, reason
            return result
        result.status = "ok"
        result.kernels = records
        result.truncated = len(records) >= launch_count
        result.metrics_missing = missing_fields(records)
        if refused and refused[0] != "failed":
            result.reason = refused[1]
        return result
    finally:
        if not keep_dir:
            shutil.rmtree(directory, ignore_errors=True)


def _tail(output: str, lines: int = 6) -> str:
    return " | ".join([line for line in output.splitlines() if line.strip()][-lines:])
