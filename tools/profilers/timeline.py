"""The system timeline: GPU activities and API calls from either tool, summarised per forward.

Why: a kernel can be fast while the program is slow. Launch overhead, host synchronisation and
host<->device copies between kernels are invisible to a per-kernel profiler; they show on the
timeline. Nsight Systems (tools.profilers.nsys) and the PyTorch profiler's Chrome trace
(`timeline_from_chrome_trace`) are read into the same records (`GpuActivity`, `ApiCall`, `Span`),
and `summarize` turns them into one summary dict per forward, counting only the GPU work launched
inside the driver's `stitch:<target>` range. Standard library only.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tools.worker.kernel_names import base_name

RANGE_PREFIX = "stitch:"  # the driver's NVTX / record_function range is f"stitch:{target}"
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
_API_SUFFIX = re.compile(r"_v\d+$|_ptsz$|_ptds$")


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
