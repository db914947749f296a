"""The machine-wide timing window: timing runs alone; builds, traces and compilations wait for it.

Why: on a shared machine a launch-bound program runs slower while neighbours compile on the same
cores, so a speedup that divides a candidate time taken during a build by a baseline taken on an
idle machine means nothing. Every time that enters a speedup is therefore taken inside `quiet()`
(an exclusive flock), and every piece of CPU-heavy work (an extension build, an fx trace, a
torch.compile compilation) runs inside `busy()` (a shared flock): any number of builds run at once,
but never while something is being timed, and a timing waits until the running builds finish.

Writers (timings) would starve behind a steady stream of readers (builds), since flock grants a
new shared lock while an exclusive one waits; so both sides pass a gate first (a second lock file):
a timing holds the gate while it waits for the window, and new builds queue at the gate behind it.

The lock files live in `$STITCHCUDA_TIMING_WINDOW` (a folder; `off` disables the window), else
in the build cache's `locks/` folder, which every worker, baseline process and graph run of a machine share.
The kernel drops an flock when its holder dies, so a killed process never leaves the window shut.
A process that used the GPU also leaves through the shared window (`exit_process`): returning its
device memory at exit is the same unmapping that a memory-bound timing next door must not see.
Standard library only: the worker island imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tools.cache_paths import default_cache_dir

WINDOW_ENV = "STITCHCUDA_TIMING_WINDOW"
SHUFFLE_ENV = "STITCHCUDA_TIMING_SHUFFLE"  # tools.worker.rounds' placement shuffle (read here: stdlib only)
WINDOW_FILE = "timing-window.lock"
GATE_FILE = "timing-window.gate"
LOCK_FOLDER = "locks"  # inside the build cache, beside the per-build locks (tools.build.cache)

_state = threading.local()  # per thread: "quiet" or "busy" while held, and the nesting depth
_used: list[Path] = []  # the window folder this process last used (exit_process leaves through it)
EXIT_WAIT_S = 5.0  # longer than a timing holds the window, short beside a worker's kill deadline


def window_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """Where the window's lock files live (None: the window is off)."""
    env = os.environ.get(WINDOW_ENV, "").strip()
    if env.lower() == "off":
        return None
    if env:
        return Path(env).expanduser()
    if not cache_dir:
        cache_dir = default_cache_dir()
    return Path(cache_dir) / LOCK_FOLDER


def shuffle_default() -> bool:
    """Whether timing rounds shuffle placements when the caller does not say ($STITCHCUDA_TIMING_SHUFFLE=1;
    tools.worker.rounds). Read here so that the baseline cache's key, which must not import torch,
    and the rounds read it alike."""
    return os.environ.get(SHUFFLE_ENV, "").strip().lower() in ("1", "on", "true", "yes")


def sandbox_paths() -> list[str]:
    """Folders a sandboxed child must be able to write for the window: $STITCHCUDA_TIMING_WINDOW when
    it points outside the build cache (which sandboxes already allow)."""
    env = os.environ.get(WINDOW_ENV, "").strip()
    return [str(Path(env).expanduser())] if env and env.lower() != "off" else []


def _held() -> str | None:
    return getattr(_state, "mode", None)


@contextlib.contextmanager
def _holding(mode: str) -> Iterator[None]:
    _state.mode, _state.depth = mode, getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1
        if _state.depth == 0:
            _state.mode = None


def _open(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    _used[:] = [path.parent]
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")  # not an import: a process that never loaded torch used no GPU
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a torch too broken to ask holds no device memory we could wait for
        return False


def exit_process(code: int, wait_s: float = EXIT_WAIT_S) -> None:
    """os._exit(code); a process with a CUDA context first takes the window shared, as a build does,
    and keeps it while it dies: the kernel releases the device's files (the context and every
    allocation, unmapped) before the lock's, opened last, so no timing overlaps the teardown. It waits
    at most `wait_s` for a timing to end (a parent's kill deadline may be near), then leaves anyway."""
    sys.stdout.flush()
    sys.stderr.flush()
    if _used and _held() is None and _cuda_initialised():
        _take_shared(_open(_used[0] / GATE_FILE), _open(_used[0] / WINDOW_FILE), time.monotonic() + wait_s)
    os._exit(code)  # the window's shared lock goes with this process's last file


def _take_shared(gate: int, window: int, until: float | None = None) -> bool:
    """The window shared, queued at the gate behind any timing that waits; with `until` (monotonic
    time) it gives up then and says so."""
    if not _flock_until(gate, fcntl.LOCK_EX, until):
        return False
    try:
        return _flock_until(window, fcntl.LOCK_SH, until)
    finally:
        fcntl.flock(gate, fcntl.LOCK_UN)


def _flock_until(fd: int, mode: int, until: float | None) -> bool:
    """flock(fd, mode): blocking, or polling until the monotonic time `until`; whether it got the lock."""
    if until is None:
        fcntl.flock(fd, mode)
        return True
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= until:
                return False
            time.sleep(0.005)


@contextlib.contextmanager
def quiet(cache_dir: str | os.PathLike[str] | None = None) -> Iterator[float]:
    """Hold the window exclusively (no build, trace or other timing on this machine meanwhile).

    Yields the seconds spent waiting. Nested inside another `quiet()` of this thread it is free;
    inside a `busy()` of this thread it raises RuntimeError (it would wait for itself).
    """
    folder = window_dir(cache_dir)
    held = _held()
    if folder is None or held == "quiet":
        with _holding("quiet"):
            yield 0.0
        return
    if held == "busy":
        raise RuntimeError("cannot open the timing window inside a build or trace of the same thread")
    started = time.perf_counter()
    gate, window = _open(folder / GATE_FILE), _open(folder / WINDOW_FILE)
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)  # new builds queue behind us from now on
        try:
            fcntl.flock(window, fcntl.LOCK_EX)  # the running builds drain
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)  # the window's exclusive lock keeps them out now
        with _holding("quiet"):
            yield time.perf_counter() - started
    finally:
        os.close(window)  # closing drops the locks
        os.close(gate)


@contextlib.contextmanager
def busy(cache_dir: str | os.PathLike[str] | None = None) -> Iterator[float]:
    """Hold the window shared, for CPU-heavy work; waits while a timing holds it. Yields the wait.

    Free when this thread already holds the window (a build started lazily inside a timing run
    happens in that window: waiting for ourselves would never end).
    """
    folder = window_dir(cache_dir)
    if folder is None or _held() is not None:
        with _holding(_held() or "busy"):
            yield 0.0
        return
    started = time.perf_counter()
    gate, window = _open(folder / GATE_FILE), _open(folder / WINDOW_FILE)
    try:
        _take_shared(gate, window)
        with _holding("busy"):
            yield time.perf_counter() - started
    finally:
        os.close(window)
        os.close(gate)
