"""System-level profile of a program's forward: GPU busy %, launches, gaps, host syncs, copies, top kernels.

Why: a kernel can be fast while the program is slow. Launch overhead, host synchronisation and
host<->device copies between kernels are invisible to a per-kernel profiler; they show on the
timeline. Two sources give the same timeline here: Nsight Systems (`tools.profilers.nsys`, preferred) and the
PyTorch profiler's Chrome trace (the fallback where nsys is absent or cannot report). Both are read
into the same records (`GpuActivity`, `ApiCall`) and `summarize` turns them into one summary dict,
whose `source` names the tool. Everything is per forward: the driver (`tools.profilers.target`) runs
`iters` forwards inside one named range, and only the GPU work launched from inside that range counts.

`system_profile(problem_source, candidate_source)` is the one entry point: nsys when it exists and
reports, else the PyTorch profiler, else a summary with status "unavailable" and the reason. Standard
library only (the profiled program runs in a child process, which imports torch).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.evaluate import wait_then_kill_group
from tools.sandbox import Sandbox, SandboxSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
RANGE_PREFIX = "stitch:"  # the driver's NVTX / record_function range is f"stitch:{target}"
DEFAULT_ITERS = 5
DEFAULT_WARMUP = 2
TOP_K = 10
GAP_REPORT_US = 10.0  # gaps longer than this are counted separately (a launch costs ~2-5 us)

SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "cudaMemcpy",  # the synchronous copies block the host too
        "cudaMemcpy2D",
        "cudaMemcpyFromSymbol",
        "cudaMemcpyToSymbol",
        "cuMemcpyDtoH_v2",
        "cuMemcpyHtoD_v2",
        "cuMemcpy",
    }
)
LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
    }
)
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
COPY_KINDS = ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "memset")

_ANON = re.compile(r"\(anonymous namespace\)::|<unnamed>::")
_API_SUFFIX = re.compile(r"_v\d+$|_ptsz$|_ptds$")


def base_name(name: str) -> str:
    """'void ns::relu_f4<float>(float const*, ...)' -> 'relu_f4': the name `__global__` declared."""
    text = _ANON.sub("", name).strip()
    if text.startswith("void "):
        text = text[len("void ") :]
    depth = 0
    for i, ch in enumerate(text):
        if ch in "<(" and depth == 0:
            text = text[:i]
            break
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
    return text.split("::")[-1].strip()


def api_base(name: str) -> str:
    """'cudaStreamSynchronize_v3020' / 'cuLaunchKernel_ptsz' -> the call's plain name."""
    return _API_SUFFIX.sub("", name.strip())


def copy_kind(name: str) -> str:
    """A copy's direction from its name in either tool: '[CUDA memcpy Host-to-Device]', 'Memcpy HtoD (...)'."""
    text = name.replace(" ", "").lower()
    if "memset" in text:
        return "memset"
    for key, words in (
        ("HtoD", ("host-to-device", "htod")),
        ("DtoH", ("device-to-host", "dtoh")),
        ("DtoD", ("device-to-device", "dtod")),
        ("HtoH", ("host-to-host", "htoh")),
        ("PtoP", ("peer-to-peer", "ptop")),
    ):
        if any(w in text for w in words):
            return key
    return "other"


@dataclass(frozen=True)
class GpuActivity:
    """One kernel, copy or memset on the GPU timeline."""

    kind: str  # "kernel", "memcpy" or "memset"
    name: str
    start_ns: int
    duration_ns: int
    correlation: int | None = None  # links it to the API call that launched it
    bytes: int = 0
    direction: str = ""  # copy_kind() for copies and memsets

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class ApiCall:
    """One CUDA runtime or driver API call on the host."""

    name: str
    start_ns: int
    duration_ns: int
    correlation: int | None = None

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class Span:
    """A named host range (the driver's `stitch:<target>` range)."""

    name: str
    start_ns: int
    end_ns: int


@dataclass
class Timeline:
    """What either tool recorded: GPU activities, API calls and the driver's ranges."""

    activities: list[GpuActivity] = field(default_factory=list)
    api_calls: list[ApiCall] = field(default_factory=list)
    ranges: list[Span] = field(default_factory=list)


def find_range(ranges: Iterable[Span], target: str) -> Span | None:
    """The driver's range for `target` ('stitch:candidate'); nsys prefixes a domain separator ':'."""
    wanted = f"{RANGE_PREFIX}{target}"
    for span in ranges:
        if span.name.lstrip(":") == wanted or span.name.endswith(f":{wanted}"):
            return span
    return None


def _merged(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _per(value: float, iters: int, digits: int = 4) -> float:
    return round(value / max(iters, 1), digits)


def summarize(
    timeline: Timeline,
    *,
    source: str,
    target: str,
    iters: int,
    own_kernels: Iterable[str] = (),
    device: str = "",
    top_k: int = TOP_K,
    require_range: bool = False,
) -> dict[str, Any]:
    """The per-forward system summary of the work launched inside the driver's range.

    Without the range (a tool that lost it) the whole capture counts and the summary says so, unless
    `require_range` (a recording of several targets cannot be split without it).
    Activities are attributed through the correlation id of the API call that launched them, so a
    kernel that runs after the range closed still counts and a warm-up's stragglers do not.
    """
    span = find_range(timeline.ranges, target)
    notes: list[str] = []
    calls = list(timeline.api_calls)
    activities = list(timeline.activities)
    if span is not None:
        # Work whose launch is not in the API trace (CUDA-graph nodes on some tools) counts when it
        # starts between this range and the next one: the driver synchronises between targets.
        following = [r.start_ns for r in timeline.ranges if r.start_ns > span.start_ns]
        until = min(following) if following else float("inf")
        known = {c.correlation for c in calls if c.correlation is not None}
        calls = [c for c in calls if span.start_ns <= c.start_ns <= span.end_ns]
        inside = {c.correlation for c in calls if c.correlation is not None}
        activities = [
            a
            for a in activities
            if a.correlation in inside or (a.correlation not in known and span.start_ns <= a.start_ns < until)
        ]
    elif require_range:
        return unavailable(source, target, f"no '{RANGE_PREFIX}{target}' range in the trace", status="failed")
    else:
        notes.append(f"no '{RANGE_PREFIX}{target}' range in the trace: the whole capture is counted")
    if not activities:
        return unavailable(
            source, target, "no GPU activity was recorded in the profiled range", device=device
        )
    first = min(a.start_ns for a in activities)
    last = max(a.end_ns for a in activities)
    start = span.start_ns if span is not None else min([first] + [c.start_ns for c in calls])
    end = max(last, span.end_ns if span is not None else last)
    window = max(end - start, 1)
    busy_intervals = _merged((a.start_ns, a.end_ns) for a in activities)
    busy = sum(e - s for s, e in busy_intervals)
    gaps = [b[0] - a[1] for a, b in zip(busy_intervals, busy_intervals[1:], strict=False)]
    kernels = [a for a in activities if a.kind == "kernel"]
    kernel_ns = sum(k.duration_ns for k in kernels)

    per_name: dict[str, list[int]] = defaultdict(list)
    for k in kernels:
        per_name[k.name].append(k.duration_ns)
    top = sorted(per_name.items(), key=lambda item: -sum(item[1]))[:top_k]
    own = set(own_kernels)
    own_ns = sum(k.duration_ns for k in kernels if base_name(k.name) in own)

    syncs: dict[str, int] = defaultdict(int)
    launches = graphs = 0
    for call in calls:
        name = api_base(call.name)
        if name in SYNC_CALLS:
            syncs[name] += 1
        if name in LAUNCH_CALLS:
            launches += 1
        elif name in GRAPH_LAUNCH_CALLS:
            graphs += 1
    copies: dict[str, dict[str, float]] = {}
    for a in activities:
        if a.kind == "kernel":
            continue
        entry = copies.setdefault(a.direction or copy_kind(a.name), {"count": 0.0, "bytes": 0.0, "ms": 0.0})
        entry["count"] += 1
        entry["bytes"] += a.bytes
        entry["ms"] += a.duration_ns / 1e6
    gap_us = [g / 1e3 for g in gaps]
    return {
        "source": source,
        "status": "ok",
        "reason": "; ".join(notes),
        "target": target,
        "device": device,
        "iters": iters,
        "wall_ms": _per(window / 1e6, iters),
        "device_ms": _per(busy / 1e6, iters),
        "gpu_busy_pct": round(100.0 * busy / window, 2),
        "idle_ms": _per((window - busy) / 1e6, iters),
        "kernel_count": _per(len(kernels), iters, 2),
        "kernel_ms": _per(kernel_ns / 1e6, iters),
        "launch_calls": _per(launches, iters, 2),
        "graph_launches": _per(graphs, iters, 2),
        "launch_gaps": {
            "count": _per(len(gaps), iters, 2),
            "total_ms": _per(sum(gaps) / 1e6, iters),
            "mean_us": round(statistics.fmean(gap_us), 3) if gap_us else 0.0,
            "median_us": round(statistics.median(gap_us), 3) if gap_us else 0.0,
            "max_us": round(max(gap_us), 3) if gap_us else 0.0,
            f"over_{GAP_REPORT_US:g}us": _per(sum(1 for g in gap_us if g > GAP_REPORT_US), iters, 2),
        },
        "host_syncs": {
            "count": _per(sum(syncs.values()), iters, 2),
            "calls": {name: _per(n, iters, 2) for name, n in sorted(syncs.items())},
        },
        "copies": {
            kind: {
                "count": _per(v["count"], iters, 2),
                "bytes": _per(v["bytes"], iters, 1),
                "ms": _per(v["ms"], iters),
            }
            for kind, v in sorted(copies.items())
        },
        "top_kernels": [
            {
                "name": name,
                "calls": _per(len(d), iters, 2),
                "total_ms": _per(sum(d) / 1e6, iters, 6),
                "share": round(sum(d) / kernel_ns, 4) if kernel_ns else 0.0,
            }
            for name, d in top
        ],
        "own_kernel_share": round(own_ns / kernel_ns, 4) if kernel_ns else 0.0,
    }


def unavailable(
    source: str, target: str, reason: str, *, status: str = "unavailable", **extra: Any
) -> dict[str, Any]:
    """A summary that says why there is none (a missing tool, no GPU, a failed run): never an exception."""
    return {"source": source, "status": status, "reason": reason, "target": target, **extra}


# ----------------------------------------------------------------------------------------------
# The PyTorch profiler's Chrome trace
# ----------------------------------------------------------------------------------------------

_TORCH_GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
_TORCH_API_CATS = {"cuda_runtime", "cuda_driver"}


def _ns(value: Any) -> int:
    return int(round(float(value) * 1000.0))


def timeline_from_chrome_trace(trace: dict[str, Any] | str) -> Timeline:
    """Read `torch.profiler`'s exported Chrome trace (timestamps in microseconds) into a Timeline."""
    data = json.loads(trace) if isinstance(trace, str) else trace
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    timeline = Timeline()
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X" or "ts" not in event:
            continue
        cat = str(event.get("cat", ""))
        name = str(event.get("name", ""))
        args = event.get("args") or {}
        correlation = args.get("correlation")
        correlation = int(correlation) if isinstance(correlation, int | float) else None
        start, duration = _ns(event["ts"]), _ns(event.get("dur", 0))
        if cat in _TORCH_GPU_CATS:
            kind = _TORCH_GPU_CATS[cat]
            timeline.activities.append(
                GpuActivity(
                    kind=kind,
                    name=name,
                    start_ns=start,
                    duration_ns=duration,
                    correlation=correlation,
                    bytes=int(args.get("bytes", 0) or 0),
                    direction="" if kind == "kernel" else copy_kind(name),
                )
            )
        elif cat in _TORCH_API_CATS:
            timeline.api_calls.append(ApiCall(name, start, duration, correlation))
        elif cat == "user_annotation" and name.startswith(RANGE_PREFIX):
            timeline.ranges.append(Span(name, start, start + duration))
    return timeline


# ----------------------------------------------------------------------------------------------
# Running the driver under a tool
# ----------------------------------------------------------------------------------------------


@dataclass
class ToolRun:
    """What one child process did: exit code, the end of its output, whether it hit the limit."""

    command: list[str]
    returncode: int | None
    output: str
    seconds: float
    timed_out: bool = False
    findings: list[dict[str, str]] = field(default_factory=list)  # sandbox_violation, when sandboxed

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.findings


# Who runs the candidate or reference code under run_tool(sandbox=...): the driver itself, or a
# profiler (loopback TCP and tracing inside the sandbox; ncu's counters need CAP_SYS_ADMIN as root).
SANDBOX_PROFILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "driver": ("program", ()),
    "nsys": ("tool", ()),
    "ncu": ("tool", ("CAP_SYS_ADMIN",)),
}


def run_tool(
    command: Sequence[str],
    *,
    timeout_s: float,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    log_path: str | os.PathLike[str] | None = None,
    tail_chars: int = 20000,
    sandbox: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> ToolRun:
    """Run `command` in its own process group with a wall-time limit; never raises for the child's sake.

    Output goes to a file (no pipe can fill up); on timeout the whole group is killed, so a hung
    profiled program dies with its profiler. sandbox: a SANDBOX_PROFILES name when the command runs
    candidate or reference code (the sandbox's root is `cwd`; cache_dir the build cache it uses).
    """
    started = time.monotonic()
    owned = log_path is None
    if owned:
        handle, name = tempfile.mkstemp(prefix="stitch-tool-", suffix=".log")
        os.close(handle)
        log_path = name
    box = _sandbox_for(sandbox, command, cwd, cache_dir, timeout_s)
    try:
        with open(log_path, "wb") as out, box or contextlib.nullcontext():
            try:
                popen = box.popen if box else functools.partial(subprocess.Popen, start_new_session=True)
                proc = popen(list(command), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT)  # fmt: skip
            except OSError as exc:
                return ToolRun(list(command), None, f"cannot start {command[0]}: {exc}", 0.0)
            timed_out = wait_then_kill_group(proc, timeout_s)
        text = Path(log_path).read_bytes()[-tail_chars:].decode(errors="replace")
        findings = box.annotate({}).get("findings", []) if box else []
        seconds = round(time.monotonic() - started, 3)
        return ToolRun(list(command), proc.returncode, text, seconds, timed_out, findings)
    finally:
        if owned:
            with contextlib.suppress(OSError):
                os.unlink(log_path)


def _sandbox_for(
    profile: str | None,
    command: Sequence[str],
    cwd: str | os.PathLike[str] | None,
    cache_dir: str | os.PathLike[str] | None,
    timeout_s: float,
) -> Sandbox | None:
    if profile is None:
        return None
    kind, caps = SANDBOX_PROFILES[profile]
    tool_home = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which(command[0]) or command[0])))
    return Sandbox(
        cwd or os.getcwd(),
        SandboxSettings.resolve(timeout_s=timeout_s),
        profile=kind,
        caches=[cache_dir] if cache_dir else [],
        readable=[tool_home] if kind == "tool" else [],
        keep_caps=caps,
    )


def driver_env(workdir: str | os.PathLike[str], extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the profiled driver (the sandbox filters it): a private TMPDIR, unbuffered output."""
    env = dict(os.environ)
    env["TMPDIR"] = str(workdir)
    env["TORCH_EXTENSIONS_DIR"] = str(Path(workdir) / "torch_extensions")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


@dataclass
class DriverFiles:
    """The files one profiling run works with, all under one directory."""

    directory: Path
    problem: Path
    candidate: Path | None
    meta: Path

    @classmethod
    def write(
        cls, directory: Path, problem_source: str, candidate_source: str | None, tag: str
    ) -> DriverFiles:
        directory.mkdir(parents=True, exist_ok=True)
        problem = directory / "problem.py"
        problem.write_text(problem_source)
        candidate = None
        if candidate_source is not None:
            candidate = directory / "candidate.py"
            candidate.write_text(candidate_source)
        return cls(directory, problem, candidate, directory / f"{tag}.meta.json")


def driver_command(
    files: DriverFiles,
    *,
    target: str,
    mode: str,
    iters: int,
    warmup: int,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    trace: Path | None = None,
    python: str = sys.executable,
) -> list[str]:
    """`python -m tools.profilers.target ...` for one target ('candidate' or 'reference')."""
    command = [python, "-m", "tools.profilers.target", "--problem", str(files.problem), "--target", target]
    if files.candidate is not None:
        command += ["--candidate", str(files.candidate)]
    command += ["--mode", mode, "--iters", str(iters), "--warmup", str(warmup), "--out", str(files.meta)]
    if arch:
        command += ["--arch", arch]
    if cache_dir:
        command += ["--cache-dir", str(cache_dir)]
    if trace is not None:
        command += ["--trace", str(trace)]
    return command


def read_meta(path: Path) -> dict[str, Any]:
    """The driver's answer (status, device, own kernels), or {} when it wrote none."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def meta_failure(meta: dict[str, Any], run: ToolRun) -> str | None:
    """Why the driver run failed, or None when it profiled what it was asked to."""
    if run.timed_out:
        return f"timed out after {run.seconds:.0f} s"
    if run.findings:
        return "the sandbox refused: " + "; ".join(f["evidence"] for f in run.findings)
    if not meta:
        tail = [line for line in run.output.splitlines() if line.strip()][-6:]
        return f"the profiled program wrote no answer (exit code {run.returncode}): " + " | ".join(tail)
    if meta.get("status") != "ok":
        return f"{meta.get('status', 'failed')}: {meta.get('message', '')}".strip()
    return None


# ----------------------------------------------------------------------------------------------
# The one interface
# ----------------------------------------------------------------------------------------------


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
    from tools.profilers import nsys  # local: nsys imports this module

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


def format_summary(summary: dict[str, Any]) -> str:
    """One or two lines for logs, Profile.summary and reports."""
    if summary.get("status") != "ok":
        return (
            f"system profile ({summary.get('source')}): {summary.get('status')}: {summary.get('reason', '')}"
        )
    gaps = summary.get("launch_gaps", {})
    syncs = summary.get("host_syncs", {}).get("count", 0)
    copies = summary.get("copies", {})
    moved = ", ".join(
        f"{k} {v['count']:g}x {v['bytes'] / 1e6:.3g} MB" for k, v in copies.items() if k in ("HtoD", "DtoH")
    )
    return (
        f"{summary['source']}: {summary['wall_ms']:.4g} ms per forward, GPU busy {summary['gpu_busy_pct']:.0f}%, "
        f"{summary['kernel_count']:g} kernels ({summary['kernel_ms']:.4g} ms), "
        f"launch gaps {gaps.get('total_ms', 0):.4g} ms (max {gaps.get('max_us', 0):.3g} us), "
        f"{syncs:g} host syncs" + (f", copies {moved}" if moved else "")
    )
