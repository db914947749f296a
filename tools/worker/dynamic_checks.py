"""Dynamic hack checks inside the worker: poisoned memory, watchers, persisting L2, profile coverage.

Why: some cheats only show when the program runs (a kernel that writes nothing into torch.empty
memory, work deferred to a thread, kernels compiled but never launched, PyTorch doing the work
behind a custom-looking binding). These helpers give the worker's strict mode its evidence; the
findings use the wire format of tools.protocol. Worker side: torch and the standard library only.

- `poison_free_memory`: fills the caching allocator's free blocks (and a fresh poison segment) with
  0xFF bytes (NaN as float32, -1 as integers) so stale memory never holds a previous answer.
- `PersistingL2`: resets the persisting-L2 limit and lines before every L2 flush (through the CUDA
  runtime torch already loaded) and reports a candidate that had set them.
- `Watch`: an audit hook that records process spawns while the candidate runs, and the Python and OS
  threads it leaves alive. (Patches of torch or time are caught by the worker's identity guards:
  Python raises no audit event for class attribute assignment.)
- `profile_split` / `coverage`: which share of the device time runs in the candidate's own kernels,
  in direct library calls (cuBLAS/cuBLASLt/cuDNN), or in PyTorch ops; operator coverage compares
  that with the reference's profile.

Dynamic finding ids (the worker's response carries them under "findings"):

| id | severity | raised by |
|---|---|---|
| lazy_output, nonfinite_output, zero_output, precision_loss, nondeterministic, constant_output | error | strict correctness (the status is wrong_output) |
| timing_output_mismatch | error | a timed call's output differed from the reference's (wrong_output) |
| patches_harness | error | a guarded function or precision setting changed (runtime_error) |
| off_stream_work | error | work escaped the current stream (the device-wide time is reported) |
| impossible_speed | error | a timed call beat the physical floor (judged by tools.evaluate) |
| own_kernels_not_run | error | compiled kernels never ran; PyTorch did the work |
| background_thread, spawns_process | error | a Python thread left alive, a process spawned, by the program |
| persisting_l2 | error | the program set a persisting-L2 limit |
| pytorch_fallback, no_custom_kernel_ran, mutates_inputs, clock_disagreement | warning | profile, inputs, clocks |
| native_thread, multiple_streams, excessive_speedup, reference_constant, float64_check_skipped, float64_reference_unavailable, timing_output_check_skipped | info | notes |
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import threading
import types
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import torch
from torch.autograd import DeviceType

from tools.protocol import Finding, finding
from tools.worker.inputs import clone_inputs
from tools.worker.kernel_names import base_name
from tools.worker.torch_profile import is_device_work, is_transfer

POISON_BYTE = 0xFF
POISON_MAX_BYTES = 2 << 30  # the fresh poison segment: at most 2 GiB ...
POISON_FREE_SHARE = 0.25  # ... and at most this share of the free device memory
SMALL_BLOCK = 1 << 20  # the caching allocator's small-pool limit
SMALL_POISON_BLOCKS = 32  # 32 MiB of poisoned small-pool blocks
CUDA_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize
WRAPPER = "stitch::forward"


# ----------------------------------------------------------------------------------------------
# Poisoned free memory
# ----------------------------------------------------------------------------------------------


def _inactive_blocks(device: torch.device) -> list[tuple[int, bool]]:
    """(size, small_pool) of every free block the caching allocator holds on `device`."""
    blocks = []
    for segment in torch.cuda.memory_snapshot():
        if segment.get("device", device.index or 0) != (device.index or 0):
            continue
        pool = segment.get("segment_pool_id")
        if pool is not None and tuple(pool) != (0, 0):
            continue  # a private pool (CUDA graphs): ordinary allocations never land there
        small = segment.get("segment_type") == "small"
        for block in segment.get("blocks", []):
            if block.get("state") == "inactive" and block.get("size", 0) >= 512:
                blocks.append((int(block["size"]), small))
    return blocks


def poison_free_memory(device: torch.device | str, max_bytes: int = POISON_MAX_BYTES) -> int:
    """Fill free device memory the next allocations will get with 0xFF bytes; returns bytes poisoned.

    Steps: release fully free segments (empty_cache), claim every free block left inside live
    segments, add a fresh large segment and some small-pool blocks, fill all of them, then free
    them back into the cache, where the candidate's torch.empty will find poison instead of a
    previous output. A no-op on the CPU.
    """
    device = torch.device(device)
    if device.type != "cuda":
        return 0
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    held: list[torch.Tensor] = []
    try:
        for size, small in sorted(_inactive_blocks(device), reverse=True):
            pieces = (
                [size] if not small else [min(SMALL_BLOCK, size - o) for o in range(0, size, SMALL_BLOCK)]
            )
            held.extend(torch.empty(p, dtype=torch.uint8, device=device) for p in pieces if p >= 512)
        free, _ = torch.cuda.mem_get_info(device)
        big = int(min(max_bytes, free * POISON_FREE_SHARE))
        if big >= SMALL_BLOCK:
            held.append(torch.empty(big, dtype=torch.uint8, device=device))
        held.extend(
            torch.empty(SMALL_BLOCK, dtype=torch.uint8, device=device) for _ in range(SMALL_POISON_BLOCKS)
        )
    except torch.OutOfMemoryError:
        pass  # poison what we could claim
    total = 0
    for tensor in held:
        tensor.fill_(POISON_BYTE)
        total += tensor.numel()
    torch.cuda.synchronize(device)
    del held
    return total


# ----------------------------------------------------------------------------------------------
# Persisting L2
# ----------------------------------------------------------------------------------------------


def _cudart() -> Any | None:
    """The CUDA runtime library this process already loaded (torch's), via ctypes; None if absent."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libcudart" in line and "/" in line}
    except OSError:
        paths = set()
    for path in sorted(paths):
        with contextlib.suppress(OSError):
            return ctypes.CDLL(path)
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        with contextlib.suppress(OSError):
            return ctypes.CDLL(name)
    return None


def persisting_l2_limit() -> int | None:
    """The device's persisting-L2 limit now (None where cudart cannot say): the worker's baseline.

    Read before the candidate is imported: some machines run with a non-zero limit by default, so
    only a limit above the one the harness found counts as the program's doing.
    """
    lib = _cudart()
    get_limit = getattr(lib, "cudaDeviceGetLimit", None) if lib is not None else None
    if get_limit is None:
        return None
    value = ctypes.c_size_t(0)
    return int(value.value) if get_limit(ctypes.byref(value), CUDA_LIMIT_PERSISTING_L2) == 0 else None


class PersistingL2:
    """Resets persisting-L2 state before each flush; remembers whether a candidate had raised the limit."""

    def __init__(self, baseline: int | None = None) -> None:
        lib = _cudart()
        names = ("cudaDeviceGetLimit", "cudaDeviceSetLimit", "cudaCtxResetPersistingL2Cache")
        self.calls = [getattr(lib, n, None) for n in names] if lib is not None else [None, None, None]
        self.baseline = int(baseline or 0)  # the limit the harness found before the program ran
        self.seen_limit = 0  # the largest limit above the baseline found when we came to reset it
        self.errors: list[str] = []

    def reset(self) -> None:
        get_limit, set_limit, reset_lines = self.calls
        if get_limit is None or set_limit is None or reset_lines is None:
            return
        value = ctypes.c_size_t(0)
        if get_limit(ctypes.byref(value), CUDA_LIMIT_PERSISTING_L2) == 0 and value.value > self.baseline:
            self.seen_limit = max(self.seen_limit, int(value.value))
            set_limit(CUDA_LIMIT_PERSISTING_L2, ctypes.c_size_t(self.baseline))
        status = reset_lines()
        if status != 0 and not self.errors:
            self.errors.append(f"cudaCtxResetPersistingL2Cache returned {status}")

    def findings(self) -> list[Finding]:
        if self.seen_limit:
            return [
                finding(
                    "persisting_l2",
                    "error",
                    f"the program set a persisting-L2 limit of {self.seen_limit} bytes (lines pinned this way "
                    "survive the L2 flush); the harness reset it before every timed call",
                )
            ]
        return []


# ----------------------------------------------------------------------------------------------
# Threads, processes and patches while the candidate runs
# ----------------------------------------------------------------------------------------------

_SPAWN_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.fork",
    "os.forkpty",
    "os.posix_spawn",
    "os.spawn",
    "os.exec",
)
_BUILD_FRAMES = ("cpp_extension", os.path.join("tools", "build", ""))  # torch's builder, or ours


def _os_threads() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


class Watch:
    """Records, while active, the processes the candidate starts; one audit hook per process."""

    _installed: Watch | None = None

    def __init__(self) -> None:
        self.active = False
        self.events: list[str] = []
        self.python_threads = {t.ident for t in threading.enumerate()}
        self.os_threads: set[int] | None = None
        self.new_os_threads: set[int] = set()
        if Watch._installed is None:
            sys.addaudithook(Watch._hook)  # audit hooks cannot be removed, so the candidate cannot remove it
        Watch._installed = self

    @staticmethod
    def _hook(event: str, args: tuple[Any, ...]) -> None:
        watch = Watch._installed
        if watch is None or not watch.active:
            return
        if event.startswith(_SPAWN_EVENTS) and not _during_build():
            watch.events.append(f"spawn: {event} {str(args[:2])[:160]}")

    @contextlib.contextmanager
    def running(self) -> Any:
        """Wrap candidate code (construction, forward) with this."""
        self.active = True
        try:
            yield
        finally:
            self.active = False

    def baseline_os_threads(self) -> None:
        """Call once the CUDA context and the reference are warm: later new OS threads are the candidate's."""
        self.os_threads = _os_threads()

    def after_call(self) -> None:
        if self.os_threads is not None:
            self.new_os_threads |= _os_threads() - self.os_threads

    def findings(self) -> list[Finding]:
        found: list[Finding] = []
        extra = [t for t in threading.enumerate() if t.ident not in self.python_threads and t.is_alive()]
        if extra:
            names = ", ".join(sorted({t.name for t in extra}))[:200]
            found.append(
                finding(
                    "background_thread",
                    "error",
                    f"{len(extra)} Python thread(s) the program started are still alive ({names}): "
                    "work can run after the timer stopped",
                )
            )
        alive = self.new_os_threads & _os_threads()
        if alive:
            found.append(  # a note only: drivers and libraries may start threads too
                finding(
                    "native_thread", "info", f"{len(alive)} new OS thread(s) appeared during forward calls"
                )
            )
        if self.events:
            found.append(finding("spawns_process", "error", "; ".join(self.events[:3])))
        return found


def _during_build() -> bool:
    """Whether an extension build (ninja, nvcc) is on the stack: its subprocesses are the harness's."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if any(part in frame.f_code.co_filename for part in _BUILD_FRAMES):
            return True
        frame = frame.f_back
    return False


# ----------------------------------------------------------------------------------------------
# Profile split and operator coverage
# ----------------------------------------------------------------------------------------------

_LIBRARY_RE = re.compile(
    r"(?i)gemm|gemv|cublas|cudnn|cutlass|xmma|nvjet|implicit_convolve|winograd|splitK|cask|sm\d\d_|"
    r"fft|conv2d_grouped|dgrad|wgrad|fprop|scal_kernel|dot_kernel|axpy"
)
_TORCH_KERNEL_RE = re.compile(
    r"at::native|at_cuda_detail|at::cuda|elementwise_kernel|reduce_kernel|vectorized_|unrolled_|"
    r"softmax_warp|cunn_|triton_|index_elementwise|CatArrayBatched|fill_kernel"
)
DATA_OPS = {
    "aten::copy_", "aten::fill_", "aten::zero_", "aten::zeros", "aten::zeros_like", "aten::ones",
    "aten::ones_like", "aten::full", "aten::full_like", "aten::empty", "aten::empty_like",
    "aten::empty_strided", "aten::clone", "aten::contiguous", "aten::to", "aten::_to_copy", "aten::cat",
    "aten::stack", "aten::reshape", "aten::view", "aten::expand", "aten::permute", "aten::transpose",
    "aten::t", "aten::as_strided", "aten::slice", "aten::select", "aten::narrow", "aten::split",
    "aten::chunk", "aten::unsqueeze", "aten::squeeze", "aten::flatten", "aten::new_empty",
    "aten::new_zeros", "aten::detach", "aten::lift_fresh", "aten::resize_", "aten::set_",
    "aten::index_select", "aten::repeat", "aten::pad", "aten::constant_pad_nd", "aten::arange",
    "aten::rand", "aten::randn", "aten::uniform_", "aten::normal_",
}  # fmt: skip


def _outermost_aten(event: Any) -> str | None:
    """The outermost aten:: op among `event` and its CPU parents (the op the program called)."""
    found = None
    node = event
    while node is not None:
        if str(node.name).startswith("aten::"):
            found = str(node.name)
        node = getattr(node, "cpu_parent", None)
    return found


def _launching_ops(ops: Iterable[Any]) -> dict[str, deque[str | None]]:
    """Kernel name -> the outermost aten:: op of each launch, in trace order, from the CPU ops' kernel lists.

    The profiler attaches each device kernel to the op that launched it (`FunctionEvent.kernels`),
    while the device event itself may carry no correlation id (torch 2.11 leaves it 0): this is
    the link that then survives.
    """
    launches: dict[str, deque[str | None]] = defaultdict(deque)
    for op in sorted(ops, key=lambda e: e.time_range.start):
        aten = _outermost_aten(op)
        for kernel in op.kernels:
            launches[kernel.name].append(aten)
    return launches


def classify_events(events: Iterable[Any], own_kernels: Collection[str], iters: int = 1) -> dict[str, Any]:
    """Device time per forward by class: own, library, direct, torch (by op), data; and streams.

    A device kernel is linked to the CPU op that launched it (profiler correlation ids). Kernels
    whose op chain holds an aten:: op ran through PyTorch ('torch', or 'data' for copies and
    allocations); the rest were launched directly by the program: 'own' when their name is one of
    its __global__ kernels, 'library' for cuBLAS/cuBLASLt/cuDNN names, else 'direct'. Kernels with
    PyTorch-native names but no op (replayed from a CUDA graph) count as 'torch'.
    """
    events = list(events)
    ops = {e.id: e for e in events if e.device_type == DeviceType.CPU and getattr(e, "kernels", None)}
    launches = _launching_ops(ops.values())
    split: dict[str, float] = defaultdict(float)
    torch_ops: dict[str, float] = defaultdict(float)
    streams: set[int] = set()
    own = set(own_kernels)
    for event in events:
        if not is_device_work(event):
            continue
        us = float(event.time_range.elapsed_us())
        if is_transfer(event):
            split["data"] += us
            continue
        streams.add(int(getattr(event, "device_resource_id", 0) or 0))
        base = base_name(event.name)
        op = ops.get(getattr(event, "linked_correlation_id", 0) or 0)
        if op is not None:
            aten = _outermost_aten(op)
        else:  # the parsed trace left the link out: take the next launch of this name from the op lists
            queue = launches.get(event.name)
            aten = queue.popleft() if queue else None
        if base in own:
            split["own"] += us
        elif aten is not None:
            if aten in DATA_OPS:
                split["data"] += us
            else:
                split["torch"] += us
                torch_ops[aten] += us
        elif _TORCH_KERNEL_RE.search(event.name):
            split["torch"] += us
            torch_ops[f"kernel:{base}"] += us
        elif _LIBRARY_RE.search(event.name):
            split["library"] += us
        else:
            split["direct"] += us
    total = sum(split.values())
    per = max(iters, 1) * 1000.0
    return {
        "device_ms": round(total / per, 6),
        "split_ms": {k: round(v / per, 6) for k, v in sorted(split.items())},
        "torch_ops_ms": {k: round(v / per, 6) for k, v in sorted(torch_ops.items(), key=lambda kv: -kv[1])},
        "streams": len(streams),
    }


PROFILE_ITERS = 2  # forwards per profile: profile_split's and the verifier's profile summary's


def profile_events(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    device: torch.device,
    warmup: int = 1,
    iters: int = PROFILE_ITERS,
) -> list[Any]:
    """The torch profiler's events of `iters` forwards (each inside a record_function wrapper)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with torch.no_grad():
        for _ in range(warmup):
            fn(*clone_inputs(inputs))
        batches = [clone_inputs(inputs) for _ in range(iters)]
        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for args in batches:
                with record_function(WRAPPER):
                    fn(*args)
            torch.cuda.synchronize(device)
    return list(prof.events())


def profile_split(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    device: torch.device,
    own_kernels: Collection[str],
    warmup: int = 1,
    iters: int = PROFILE_ITERS,
) -> dict[str, Any]:
    """Run `fn` under the torch profiler (inside a record_function wrapper) and classify its kernels."""
    return classify_events(profile_events(fn, inputs, device, warmup, iters), own_kernels, iters)


def coverage(candidate: dict[str, Any], reference: dict[str, Any]) -> float | None:
    """Share of the reference's device time the candidate no longer leaves to PyTorch compute ops.

    uncovered = sum over the candidate's PyTorch compute ops of min(candidate ms, reference ms of
    the same op) (the candidate's ms when the reference has no such op), capped at the reference's
    total; coverage = 1 - uncovered / reference total.
    """
    ref_total = float(reference.get("device_ms") or 0.0)
    if ref_total <= 0:
        return None
    ref_ops = reference.get("torch_ops_ms", {})
    uncovered = 0.0
    for op, ms in candidate.get("torch_ops_ms", {}).items():
        uncovered += min(ms, ref_ops.get(op, ms))
    return round(max(0.0, 1.0 - min(uncovered, ref_total) / ref_total), 4)


def profile_findings(candidate: dict[str, Any], own_kernels: Collection[str]) -> list[Finding]:
    """What the candidate's profile shows: no custom kernel ran, compiled kernels never ran, fallbacks."""
    split = candidate.get("split_ms", {})
    own, library, direct, torch_ms = (float(split.get(k, 0.0)) for k in ("own", "library", "direct", "torch"))
    total = float(candidate.get("device_ms") or 0.0)
    found: list[Finding] = []
    if own_kernels and own == 0.0 and library == 0.0 and direct == 0.0:
        found.append(
            finding(
                "own_kernels_not_run",
                "error",
                f"the program compiled kernels ({', '.join(sorted(own_kernels)[:6])}) but none of them ran; "
                f"{torch_ms:.4g} ms per forward ran in PyTorch kernels",
            )
        )
    elif own == 0.0 and library == 0.0 and direct == 0.0 and total > 0:
        found.append(
            finding(
                "no_custom_kernel_ran", "warning", f"all {total:.4g} ms per forward ran in PyTorch kernels"
            )
        )
    if torch_ms > 0:
        ops = ", ".join(f"{op} {ms:.3g} ms" for op, ms in list(candidate.get("torch_ops_ms", {}).items())[:5])
        share = torch_ms / total if total else 0.0
        found.append(
            finding(
                "pytorch_fallback", "warning", f"{share:.0%} of device time in PyTorch compute ops: {ops}"
            )
        )
    if int(candidate.get("streams", 0)) > 1:
        found.append(finding("multiple_streams", "info", f"kernels ran on {candidate['streams']} streams"))
    return found
