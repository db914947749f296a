"""Speed of light: device ceilings, the SOL time of a problem, % of SOL, and per-kernel boundedness.

    python -m tools.roofline --measure [--cache PATH]     # on the GPU machine: measure and cache

Why: a time means little without the best time the device allows. For a problem with F FLOPs that
must move at least B bytes (inputs and weights read once, outputs written once; the planner's fx
analysis counts both: Plan.total_flops / total_bytes), SOL = max(B / bandwidth, F / rate), with the
rate of the precision the problem is held to (fp32 without TF32 for our suite: KernelBench's 1e-4
tolerance). Every report gives time as % of SOL (100% = at the ceiling).

The ceilings are measured once per GPU with small torch benchmarks (device-to-device copy; 8192^3
matmuls in fp32 without TF32, TF32 and BF16) and cached by GPU name. The fp32 rate is SGEMM's,
the practical fp32 FMA ceiling (datasheet peaks are higher and unreachable). Without a GPU and
without a cache entry, known measurements (the H200's, from docs/hardware.md) stand in, and the
Ceilings say so in `source`.

Kernels are classified from their NCU record the way Nsight Compute's Speed-of-Light section reads:
a kernel using >= 60% of the SM's or the memory system's peak is compute- or memory-bound, whichever
is higher; below that on both it is latency-bound (too little parallelism or too short to fill the
GPU). Standard library at import; torch only inside the measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from tools.process import repo_env

CACHE_ENV = "STITCHCUDA_CEILINGS"
HIGH_THROUGHPUT_PCT = 60.0  # Nsight Compute's "high throughput" line for SOL breakdowns
SHORT_KERNEL_NS = 5_000.0  # shorter kernels cannot fill an H100/H200 class GPU (launch + ramp-up)
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class Ceilings:
    """What one GPU can do at best: bytes/s of copy bandwidth (read + write) and FLOP/s per precision."""

    gpu: str
    copy_bandwidth: float
    fp32_flops: float
    tf32_flops: float
    bf16_flops: float
    source: str  # "measured", "cache", or "assumed: ..." for stand-ins
    measured_at: str = ""

    def rate(self, precision: str) -> float:
        """The FLOP/s ceiling for a precision mode: fp32 (no TF32), tf32, bf16 or fp16 (bf16's rate)."""
        if precision == "fp32":
            return self.fp32_flops
        if precision == "tf32":
            return self.tf32_flops
        if precision in ("bf16", "fp16"):
            return self.bf16_flops
        raise ValueError(f"unknown precision {precision!r}; one of {', '.join(PRECISIONS)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceilings:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


KNOWN: dict[str, Ceilings] = {
    "NVIDIA H200": Ceilings(
        gpu="NVIDIA H200",
        copy_bandwidth=4.3e12,
        fp32_flops=51e12,
        tf32_flops=356e12,
        bf16_flops=686e12,
        source="assumed: H200 measurements in docs/hardware.md (copy 4.0-4.3 TB/s; 8192^3 matmul)",
    )
}
FALLBACK_GPU = "NVIDIA H200"  # the project's target, when nothing says which GPU


def precision_mode(dtype: str = "float32", allow_tf32: bool = False) -> str:
    """The precision a problem's arithmetic is held to: fp32 unless TF32 is allowed or the data is 16-bit."""
    name = dtype.removeprefix("torch.")
    if name in ("bfloat16",):
        return "bf16"
    if name in ("float16", "half"):
        return "fp16"
    return "tf32" if allow_tf32 else "fp32"


@dataclass(frozen=True)
class SpeedOfLight:
    """The SOL time of one problem on one GPU, and which ceiling sets it."""

    flops: int
    bytes: int
    precision: str
    bandwidth: float
    rate: float
    memory_ms: float
    compute_ms: float
    gpu: str
    ceilings_source: str

    @property
    def sol_ms(self) -> float:
        return max(self.memory_ms, self.compute_ms)

    @property
    def bound(self) -> str:
        """'memory' or 'compute': the larger of the two lower bounds."""
        return "memory" if self.memory_ms >= self.compute_ms else "compute"

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity in FLOP per byte (None without bytes)."""
        return self.flops / self.bytes if self.bytes else None

    def pct_of_sol(self, measured_ms: float | None) -> float | None:
        """100 * SOL / measured: 100% means the program runs at the device's ceiling."""
        if not measured_ms or measured_ms <= 0 or self.sol_ms <= 0:
            return None
        return 100.0 * self.sol_ms / measured_ms

    def to_dict(self, measured_ms: float | None = None) -> dict[str, Any]:
        data = asdict(self)
        data.update(sol_ms=self.sol_ms, bound=self.bound, intensity=self.intensity)
        if measured_ms is not None:
            data["measured_ms"] = measured_ms
            data["pct_of_sol"] = self.pct_of_sol(measured_ms)
        return data

    def describe(self, measured_ms: float | None = None) -> str:
        """'SOL 1.00 ms (memory-bound: 4.29 GB at 4.3 TB/s; 0.54 GFLOP at 51 TFLOP/s fp32); 1.07 ms is 94% of SOL'."""
        text = (
            f"SOL {self.sol_ms:.4g} ms ({self.bound}-bound: {self.bytes / 1e9:.3g} GB at {self.bandwidth / 1e12:.3g} TB/s, "
            f"{self.flops / 1e9:.3g} GFLOP at {self.rate / 1e12:.3g} TFLOP/s {self.precision})"
        )
        pct = self.pct_of_sol(measured_ms)
        if pct is not None:
            text += f"; {measured_ms:.4g} ms is {pct:.1f}% of SOL"
        return text


def speed_of_light(flops: int, nbytes: int, ceilings: Ceilings, precision: str = "fp32") -> SpeedOfLight:
    """SOL = max(bytes / copy bandwidth, FLOPs / rate of the precision mode)."""
    rate = ceilings.rate(precision)
    return SpeedOfLight(
        flops=int(flops),
        bytes=int(nbytes),
        precision=precision,
        bandwidth=ceilings.copy_bandwidth,
        rate=rate,
        memory_ms=nbytes / ceilings.copy_bandwidth * 1e3 if ceilings.copy_bandwidth else 0.0,
        compute_ms=flops / rate * 1e3 if rate else 0.0,
        gpu=ceilings.gpu,
        ceilings_source=ceilings.source,
    )


FLOOR_SHARE = 0.5  # of the SOL time that a physical floor keeps (see floor_ms)


def floor_ms(flops: int, nbytes: int, ceilings: Ceilings) -> float:
    """A time no honest forward can beat: half of max(bytes / bandwidth, FLOPs / fastest tensor rate).

    Why half and the fastest rate: a floor must never fail a real program. Writes can still sit in
    the 50 MB L2 when the kernel ends (so only about half the compulsory traffic is sure to be paid
    inside the timed window), and a program may use any precision the tolerance admits. Cheats that
    move the work out of the timed window land far below this (microseconds).
    """
    rate = max(ceilings.fp32_flops, ceilings.tf32_flops, ceilings.bf16_flops)
    memory = nbytes / ceilings.copy_bandwidth if ceilings.copy_bandwidth else 0.0
    compute = flops / rate if rate else 0.0
    return FLOOR_SHARE * max(memory, compute) * 1e3


def work_floor_ms(work: tuple[int, int], gpu: str) -> float | None:
    """The physical floor for (FLOPs, bytes) on `gpu`, or None without work figures or known ceilings."""
    flops, nbytes = work
    ceilings = known_ceilings(gpu)
    if ceilings is None or (flops <= 0 and nbytes <= 0):
        return None
    return floor_ms(flops, nbytes, ceilings)


# ----------------------------------------------------------------------------------------------
# Kernel classification
# ----------------------------------------------------------------------------------------------


def classify_kernel(record: Any) -> tuple[str, str]:
    """('memory-bound' | 'compute-bound' | 'latency-bound' | 'unknown', why) from one NCU record.

    record: a tools.profilers.ncu.KernelMetrics (duck-typed: sm_throughput_pct, memory_throughput_pct,
    dram_throughput_pct, duration_ns).
    """
    sm = record.sm_throughput_pct
    memory = (
        record.memory_throughput_pct
        if record.memory_throughput_pct is not None
        else record.dram_throughput_pct
    )
    if sm is None and memory is None:
        return "unknown", "no throughput metrics in the record"
    sm, memory = sm or 0.0, memory or 0.0
    top = max(sm, memory)
    figures = f"SM {sm:.0f}% / memory {memory:.0f}% of peak"
    duration = record.duration_ns or 0.0
    if top < HIGH_THROUGHPUT_PCT and 0 < duration < SHORT_KERNEL_NS:
        return "latency-bound", f"{figures} in {duration / 1e3:.2f} us: too short to fill the GPU"
    if top >= HIGH_THROUGHPUT_PCT:
        if sm >= memory:
            return "compute-bound", f"{figures}: the SM pipelines are the limit"
        return "memory-bound", f"{figures}: the memory system is the limit"
    return "latency-bound", f"{figures}: neither is near its peak (latency or too little parallelism)"


# ----------------------------------------------------------------------------------------------
# Measuring and caching
# ----------------------------------------------------------------------------------------------


def default_cache_path() -> Path:
    """$STITCHCUDA_CEILINGS, else ~/.cache/stitchcuda/ceilings.json."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "stitchcuda" / "ceilings.json"


def load_cache(path: Path | None = None) -> dict[str, Ceilings]:
    path = path or default_cache_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    result = {}
    for gpu, entry in data.items() if isinstance(data, dict) else []:
        try:
            result[gpu] = Ceilings.from_dict(entry)
        except TypeError:
            continue
    return result


def save_cache(ceilings: Ceilings, path: Path | None = None) -> None:
    path = path or default_cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = {gpu: c.to_dict() for gpu, c in load_cache(path).items()}
    entries[ceilings.gpu] = ceilings.to_dict()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1, sort_keys=True))
    os.replace(tmp, path)


def measure_ceilings(
    device: int = 0, size: int = 8192, copy_bytes: int = 1 << 30, reps: int = 10
) -> Ceilings:
    """Measure the ceilings on this process's GPU (about 2 s on an H200). TF32 settings are restored."""
    import torch

    dev = torch.device("cuda", device)

    def timed(fn: Any) -> float:
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(dev)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize(dev)
        return start.elapsed_time(end) / 1e3 / reps

    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device=dev).normal_()
    dst = torch.empty_like(src)
    copy_bw = 2 * copy_bytes / timed(lambda s=src, d=dst: d.copy_(s))
    del src, dst
    rates = {}
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for key, dtype, tf32 in (
            ("fp32", torch.float32, False),
            ("tf32", torch.float32, True),
            ("bf16", torch.bfloat16, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(size, size, device=dev, dtype=dtype)
            b = torch.randn(size, size, device=dev, dtype=dtype)
            rates[key] = 2.0 * size**3 / timed(lambda a=a, b=b: torch.mm(a, b))
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    torch.cuda.empty_cache()
    return Ceilings(
        gpu=torch.cuda.get_device_name(dev),
        copy_bandwidth=copy_bw,
        fp32_flops=rates["fp32"],
        tf32_flops=rates["tf32"],
        bf16_flops=rates["bf16"],
        source="measured",
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
    )


def measure_in_subprocess(
    python: str = sys.executable, cache: Path | None = None, timeout_s: float = 180.0
) -> Ceilings | None:
    """Measure in a child process (the caller's process need not touch CUDA); None when it cannot."""
    command = [python, "-m", "tools.roofline", "--measure"] + (["--cache", str(cache)] if cache else [])
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env=repo_env(), check=False
        )
        return Ceilings.from_dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, TypeError):
        return None


def known_ceilings(gpu: str, cache: Path | None = None) -> Ceilings | None:
    """The cached measurement or the built-in figures for `gpu`; None for a GPU we know nothing about."""
    cached = load_cache(cache)
    if gpu in cached:
        return cached[gpu]
    return KNOWN.get(gpu)


def device_ceilings(
    gpu: str | None = None, *, measure: bool = False, cache: Path | None = None, python: str = sys.executable
) -> Ceilings:
    """The ceilings of `gpu` (a torch device name): cache, then (if `measure`) a measurement, then known values.

    Never raises: the last resort is the project's H200 figures, labelled 'assumed' in `source`.
    """
    cached = load_cache(cache)
    if gpu and gpu in cached:
        found = cached[gpu]
        return Ceilings.from_dict(
            {**found.to_dict(), "source": f"cache ({found.source} {found.measured_at})".strip()}
        )
    if measure:
        measured = measure_in_subprocess(python, cache)
        if measured is not None and (not gpu or measured.gpu == gpu):
            return measured
    if gpu and gpu in KNOWN:
        return KNOWN[gpu]
    base = KNOWN[FALLBACK_GPU]
    where = gpu or "this machine"
    label = f"assumed: no measurement for {where}; {FALLBACK_GPU} measurements in docs/hardware.md"
    return Ceilings.from_dict({**base.to_dict(), "gpu": gpu or base.gpu, "source": label})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.roofline", description=__doc__.split("\n")[0])
    parser.add_argument("--measure", action="store_true", help="measure this GPU's ceilings and cache them")
    parser.add_argument(
        "--cache", help=f"cache file (default: ${CACHE_ENV} or ~/.cache/stitchcuda/ceilings.json)"
    )
    args = parser.parse_args(argv)
    cache = Path(args.cache) if args.cache else None
    if args.measure:
        ceilings = measure_ceilings()
        save_cache(ceilings, cache)
    else:
        ceilings = device_ceilings(None, cache=cache)
    print(json.dumps(ceilings.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
