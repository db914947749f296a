"""Nsight Systems: record the driver's forwards, export CSV reports, summarise the timeline.

    nsys profile --trace=cuda,nvtx --capture-range=cudaProfilerApi ... python -m tools.profilers.target ...
    nsys stats --format csv --report cuda_gpu_kern_sum --report ... --output BASE BASE.nsys-rep

Why these reports: the three summaries (kernels, API calls, copies by time and size) are what a person
reads first, and the two traces (GPU activities and API calls, with correlation ids) plus the NVTX
push/pop trace let `tools.profilers.timeline.summarize` count only the work launched inside the driver's
range, per forward: GPU busy %, launch gaps, host syncs, copies and top kernels.

On the project's H200 machine nsys ships inside Nsight Compute and `nsys profile` leaves only a
`.qdstrm` because its importer cannot load libdw/libelf/libdebuginfod; with the Debian libraries from
`evals/device/nsys_libs.sh` on LD_LIBRARY_PATH (`.nsys-libs/` in the repo, or $STITCHCUDA_NSYS_LIBS),
`QdstrmImporter` turns it into a `.nsys-rep`. Every failure becomes a summary with a status and a
reason, never an exception. Standard library only.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.process import REPO_ROOT
from tools.profilers.timeline import (
    SYNC_CALLS,
    ApiCall,
    GpuActivity,
    Span,
    Timeline,
    api_base,
    copy_kind,
    summarize,
    unavailable,
)
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
from tools.worker.kernel_names import base_name

NSYS_ENV = "STITCHCUDA_NSYS"
LIBS_ENV = "STITCHCUDA_NSYS_LIBS"
SUMMARY_REPORTS = ("cuda_gpu_kern_sum", "cuda_api_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum")
TRACE_REPORTS = ("cuda_gpu_trace", "cuda_api_trace", "nvtx_pushpop_trace")
REPORTS = SUMMARY_REPORTS + TRACE_REPORTS
_SEARCH = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/usr/local/cuda/nsight-systems-*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
)
_SIZE_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_TIME_UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def find_nsys() -> str | None:
    """$STITCHCUDA_NSYS, `nsys` on PATH, or a known install folder (newest version first)."""
    env = os.environ.get(NSYS_ENV)
    if env:
        return env if os.access(env, os.X_OK) else None
    found = shutil.which("nsys")
    if found:
        return found
    for pattern in _SEARCH:
        hits = sorted(glob.glob(pattern), reverse=True)
        if hits:
            return hits[0]
    return None


def find_importer(nsys: str) -> str | None:
    """QdstrmImporter of the same install: beside nsys or in a sibling host folder."""
    root = Path(nsys).resolve().parent
    for base in (root, root.parent):
        hits = sorted(glob.glob(str(base / "**" / "QdstrmImporter"), recursive=True))
        if hits:
            return hits[0]
    return None


def library_dir() -> str | None:
    """Where the importer's missing libraries are: $STITCHCUDA_NSYS_LIBS or the repo's .nsys-libs."""
    env = os.environ.get(LIBS_ENV)
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT / ".nsys-libs" / "usr" / "lib" / "x86_64-linux-gnu")
    for path in candidates:
        if path.is_dir():
            return str(path)
    return None


# ----------------------------------------------------------------------------------------------
# CSV reports
# ----------------------------------------------------------------------------------------------


def read_table(text: str) -> list[dict[str, str]]:
    """The rows of one `nsys stats --format csv` report, skipping any preamble lines before the header.

    The header is the first line whose CSV fields include a known column ('Name', 'Operation' or
    'Start (ns)'); nsys writes notices ('Generating SQLite file ...', 'Processing [...]') above it.
    """
    lines = text.splitlines()
    for index, line in enumerate(lines):
        try:
            fields = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            continue
        if len(fields) >= 3 and (
            {"Name", "Operation"} & set(fields) or any(f.startswith("Start (") for f in fields)
        ):
            reader = csv.DictReader(io.StringIO("\n".join(lines[index:])))
            return [row for row in reader if any((v or "").strip() for v in row.values())]
    return []


def _number(text: str | None) -> float:
    if text is None:
        return 0.0
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return 0.0
    try:
        return float(cleaned)
    except ValueError:
        return 0.0


def _column(row: dict[str, str], prefix: str) -> tuple[str | None, float]:
    """(unit, scale) of the first column named 'prefix (unit)': 'Total Time (ns)' -> ('ns', 1)."""
    for key in row:
        if key and key.startswith(prefix + " (") and key.endswith(")"):
            unit = key[len(prefix) + 2 : -1].strip().lower()
            return key, float(_TIME_UNITS.get(unit) or _SIZE_UNITS.get(unit) or 1.0)
    return None, 1.0


def _scaled(row: dict[str, str], prefix: str) -> float:
    key, scale = _column(row, prefix)
    return _number(row.get(key)) * scale if key else 0.0


def parse_kern_sum(text: str) -> list[dict[str, Any]]:
    """cuda_gpu_kern_sum: one row per kernel name, total time in ns, sorted by it."""
    rows = [
        {
            "name": row.get("Name", ""),
            "instances": int(_number(row.get("Instances"))),
            "total_ns": _scaled(row, "Total Time"),
            "avg_ns": _scaled(row, "Avg"),
            "max_ns": _scaled(row, "Max"),
        }
        for row in read_table(text)
    ]
    return sorted(rows, key=lambda r: -r["total_ns"])


def parse_api_sum(text: str) -> list[dict[str, Any]]:
    """cuda_api_sum: one row per API call name, with its call count and total host time in ns."""
    return [
        {
            "name": row.get("Name", ""),
            "calls": int(_number(row.get("Num Calls"))),
            "total_ns": _scaled(row, "Total Time"),
        }
        for row in read_table(text)
    ]


def parse_mem_time_sum(text: str) -> dict[str, dict[str, float]]:
    """cuda_gpu_mem_time_sum: count and total ns per copy direction (HtoD, DtoH, DtoD, memset, ...)."""
    result: dict[str, dict[str, float]] = {}
    for row in read_table(text):
        entry = result.setdefault(copy_kind(row.get("Operation", "")), {"count": 0.0, "total_ns": 0.0})
        entry["count"] += _number(row.get("Count"))
        entry["total_ns"] += _scaled(row, "Total Time")
    return result


def parse_mem_size_sum(text: str) -> dict[str, dict[str, float]]:
    """cuda_gpu_mem_size_sum: count and total bytes per direction ('Total (MB)' is 10^6 bytes)."""
    result: dict[str, dict[str, float]] = {}
    for row in read_table(text):
        entry = result.setdefault(copy_kind(row.get("Operation", "")), {"count": 0.0, "bytes": 0.0})
        entry["count"] += _number(row.get("Count"))
        entry["bytes"] += _scaled(row, "Total")
    return result


def _correlation(row: dict[str, str]) -> int | None:
    for key in ("CorrId", "CorrID", "Correlation ID"):
        value = (row.get(key) or "").strip()
        if value:
            try:
                return int(float(value))
            except ValueError:
                return None
    return None


def parse_gpu_trace(text: str) -> list[GpuActivity]:
    """cuda_gpu_trace: kernels, copies ('[CUDA memcpy Host-to-Device]') and memsets, in start order."""
    activities = []
    for row in read_table(text):
        name = row.get("Name", "")
        is_copy = name.startswith("[CUDA mem")
        kind = "kernel"
        if is_copy:
            kind = "memset" if "memset" in name.lower() else "memcpy"
        activities.append(
            GpuActivity(
                kind=kind,
                name=name,
                start_ns=int(_scaled(row, "Start")),
                duration_ns=int(_scaled(row, "Duration")),
                correlation=_correlation(row),
                bytes=int(round(_scaled(row, "Bytes"))) if is_copy else 0,
                direction=copy_kind(name) if is_copy else "",
            )
        )
    return sorted(activities, key=lambda a: a.start_ns)


def parse_api_trace(text: str) -> list[ApiCall]:
    """cuda_api_trace: every runtime and driver API call with its correlation id."""
    return [
        ApiCall(
            row.get("Name", ""), int(_scaled(row, "Start")), int(_scaled(row, "Duration")), _correlation(row)
        )
        for row in read_table(text)
    ]


def parse_nvtx_trace(text: str) -> list[Span]:
    """nvtx_pushpop_trace: the driver's ranges (names come with a domain prefix, ':stitch:candidate')."""
    spans = []
    for row in read_table(text):
        start = _scaled(row, "Start")
        end = _scaled(row, "End") or start + _scaled(row, "Duration")
        spans.append(Span(row.get("Name", ""), int(start), int(end)))
    return spans


def summary_from_reports(
    reports: dict[str, str],
    *,
    target: str,
    iters: int,
    own_kernels: list[str] | tuple[str, ...] = (),
    device: str = "",
    require_range: bool = False,
) -> dict[str, Any]:
    """The system summary from the exported CSV texts, keyed by report name.

    With the GPU and API traces the summary is exact and windowed to the driver's range. With only
    the summary reports it is 'degraded': totals over the whole capture (the driver's final
    synchronize included), no busy % and no gaps; a recording of several targets
    (`require_range`) cannot be split that way and fails instead.
    """
    if reports.get("cuda_gpu_trace") and read_table(reports["cuda_gpu_trace"]):
        timeline = Timeline(
            activities=parse_gpu_trace(reports["cuda_gpu_trace"]),
            api_calls=parse_api_trace(reports.get("cuda_api_trace", "")),
            ranges=parse_nvtx_trace(reports.get("nvtx_pushpop_trace", "")),
        )
        summary = summarize(
            timeline,
            source="nsys",
            target=target,
            iters=iters,
            own_kernels=own_kernels,
            device=device,
            require_range=require_range,
        )
        if summary.get("status") == "ok" and not timeline.api_calls:
            summary["reason"] = "; ".join(
                filter(None, [summary["reason"], "no API trace: host syncs not counted"])
            )
        return summary
    if require_range:
        return unavailable(
            "nsys", target, "no cuda_gpu_trace report: the targets cannot be told apart", status="failed"
        )
    kernels = parse_kern_sum(reports.get("cuda_gpu_kern_sum", ""))
    if not kernels:
        return unavailable(
            "nsys",
            target,
            "nsys reported no kernels (no cuda_gpu_trace or cuda_gpu_kern_sum rows)",
            status="failed",
        )
    total = sum(k["total_ns"] for k in kernels)
    times = parse_mem_time_sum(reports.get("cuda_gpu_mem_time_sum", ""))
    sizes = parse_mem_size_sum(reports.get("cuda_gpu_mem_size_sum", ""))
    syncs = {
        api_base(r["name"]): round(r["calls"] / iters, 2)
        for r in parse_api_sum(reports.get("cuda_api_sum", ""))
        if api_base(r["name"]) in SYNC_CALLS
    }
    own = set(own_kernels)
    return {
        "source": "nsys",
        "status": "degraded",
        "reason": "no trace reports: totals over the whole capture, no busy % or launch gaps",
        "target": target,
        "device": device,
        "iters": iters,
        "kernel_count": round(sum(k["instances"] for k in kernels) / iters, 2),
        "kernel_ms": round(total / 1e6 / iters, 4),
        "device_ms": round((total + sum(v["total_ns"] for v in times.values())) / 1e6 / iters, 4),
        "host_syncs": {"count": round(sum(syncs.values()), 2), "calls": syncs},
        "copies": {
            kind: {
                "count": round(times.get(kind, sizes.get(kind, {})).get("count", 0.0) / iters, 2),
                "bytes": round(sizes.get(kind, {}).get("bytes", 0.0) / iters, 1),
                "ms": round(times.get(kind, {}).get("total_ns", 0.0) / 1e6 / iters, 4),
            }
            for kind in sorted(set(times) | set(sizes))
        },
        "top_kernels": [
            {
                "name": k["name"],
                "calls": round(k["instances"] / iters, 2),
                "total_ms": round(k["total_ns"] / 1e6 / iters, 6),
                "share": round(k["total_ns"] / total, 4) if total else 0.0,
            }
            for k in kernels[:10]
        ],
        "own_kernel_share": round(
            sum(k["total_ns"] for k in kernels if base_name(k["name"]) in own) / total, 4
        )
        if total
        else 0.0,
    }


# ----------------------------------------------------------------------------------------------
# Running nsys
# ----------------------------------------------------------------------------------------------


def record_command(nsys: str, base: Path, target_command: list[str]) -> list[str]:
    """`nsys profile` limited to the driver's cudaProfilerStart/Stop range, CUDA graphs traced per node."""
    return [
        nsys,
        "profile",
        "--trace=cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--cuda-graph-trace=node",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--force-overwrite=true",
        f"--output={base}",
        *target_command,
    ]


def stats_command(nsys: str, report: Path, base: Path, reports: tuple[str, ...] = REPORTS) -> list[str]:
    """`nsys stats` writing one CSV per report: BASE_<report>.csv."""
    command = [nsys, "stats", "--force-export=true", "--force-overwrite=true", "--format", "csv"]
    for name in reports:
        command += ["--report", name]
    return command + ["--output", str(base), str(report)]


def import_qdstrm(nsys: str, qdstrm: Path, timeout_s: float = 120.0) -> tuple[Path | None, str]:
    """Turn a .qdstrm into a .nsys-rep with QdstrmImporter (and the carried libraries)."""
    importer = find_importer(nsys)
    if importer is None:
        return None, "nsys left a .qdstrm and no QdstrmImporter was found beside it"
    env = dict(os.environ)
    libs = library_dir()
    if libs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libs, env.get("LD_LIBRARY_PATH", "")) if p)
    run = run_tool([importer, "-i", str(qdstrm)], timeout_s=timeout_s, env=env)
    report = qdstrm.with_suffix(".nsys-rep")
    if report.exists():
        return report, ""
    hint = "" if libs else f" (no libdw/libelf/libdebuginfod found: set {LIBS_ENV} or carry .nsys-libs/)"
    tail = " | ".join(line for line in run.output.splitlines() if line.strip())[-300:]
    return None, f"QdstrmImporter made no report{hint}: {tail}"


def export_reports(
    nsys: str, report: Path, base: Path, timeout_s: float = 180.0
) -> tuple[dict[str, str], str]:
    """Run `nsys stats` and read back every CSV it wrote; the second value explains missing ones."""
    run = run_tool(stats_command(nsys, report, base), timeout_s=timeout_s)
    texts: dict[str, str] = {}
    missing = []
    for name in REPORTS:
        path = Path(f"{base}_{name}.csv")
        if path.exists():
            texts[name] = path.read_text(errors="replace")
        else:
            missing.append(name)
    if missing and len(missing) < len(REPORTS):  # one unknown report name must not cost the others
        for name in list(missing):
            run_tool(stats_command(nsys, report, base, (name,)), timeout_s=timeout_s)
            path = Path(f"{base}_{name}.csv")
            if path.exists():
                texts[name] = path.read_text(errors="replace")
                missing.remove(name)
    note = ""
    if missing:
        tail = " | ".join(line for line in run.output.splitlines() if line.strip())[-300:]
        note = f"nsys stats wrote no {', '.join(missing)}: {tail}"
    return texts, note


def profile_system(
    problem_source: str,
    candidate_source: str | None = None,
    *,
    target: str | None = None,
    iters: int = DEFAULT_ITERS,
    warmup: int = DEFAULT_WARMUP,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    timeout_s: float = 300.0,
    keep_dir: str | os.PathLike[str] | None = None,
    nsys: str | None = None,
    python: str = sys.executable,
) -> dict[str, Any]:
    """Record `iters` forwards of the candidate (or reference) under nsys and summarise them."""
    target = target or ("candidate" if candidate_source is not None else "reference")
    nsys = nsys or find_nsys()
    if nsys is None:
        return unavailable("nsys", target, f"nsys not found (PATH, {NSYS_ENV}, /opt/nvidia/...)")
    directory = Path(keep_dir) if keep_dir else Path(tempfile.mkdtemp(prefix="stitch-nsys-"))
    try:
        files = DriverFiles.write(directory, problem_source, candidate_source, f"nsys-{target}")
        base = directory / f"nsys-{target}"
        command = driver_command(
            files,
            target=target,
            mode="range",
            iters=iters,
            warmup=warmup,
            arch=arch,
            cache_dir=cache_dir,
            python=python,
        )
        run = run_tool(
            record_command(nsys, base, command),
            timeout_s=timeout_s,
            cwd=directory,
            env=driver_env(directory),
            log_path=directory / f"nsys-{target}.log",
            sandbox="nsys",
            cache_dir=cache_dir,
        )
        meta = read_meta(files.meta)
        if meta.get("status") == "no_gpu":
            return unavailable("nsys", target, "no CUDA device", status="no_gpu")
        failure = meta_failure(meta, run)
        if failure is not None:
            return unavailable("nsys", target, failure, status="failed")
        return summarize_recording(nsys, base, targets=[target], meta=meta, iters=iters)[target]
    finally:
        if not keep_dir:
            shutil.rmtree(directory, ignore_errors=True)


def summarize_recording(
    nsys: str, base: Path, *, targets: list[str], meta: dict[str, Any], iters: int
) -> dict[str, dict[str, Any]]:
    """Import (if needed), export and summarise one recording at BASE(.nsys-rep|.qdstrm), per target."""

    def failed(reason: str) -> dict[str, dict[str, Any]]:
        return {t: unavailable("nsys", t, reason, status="failed") for t in targets}

    report = base.with_suffix(".nsys-rep")
    if not report.exists():
        qdstrm = base.with_suffix(".qdstrm")
        if not qdstrm.exists():
            return failed("nsys wrote neither a .nsys-rep nor a .qdstrm")
        imported, why = import_qdstrm(nsys, qdstrm)
        if imported is None:
            return failed(why)
        report = imported
    texts, note = export_reports(nsys, report, base)
    summaries = {}
    for target in targets:
        summary = summary_from_reports(
            texts,
            target=target,
            iters=int(meta.get("iters", iters)),
            own_kernels=list(meta.get("own_kernels", [])) if target == "candidate" else [],
            device=str(meta.get("device", "")),
            require_range=len(targets) > 1,
        )
        if note and summary.get("status") in ("ok", "degraded"):
            summary["reason"] = "; ".join(filter(None, [summary.get("reason", ""), note]))
        summaries[target] = summary
    return summaries
