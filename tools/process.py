"""Child processes and the files they exchange: kill a process group, capped logs, atomic JSON files.

Why one module: the evaluation worker, the baseline process and the profilers are all children that
run in their own session, answer in a JSON file and may have to be killed with everything they
started. The parent side (tools.evaluate, tools.baselines, tools.profilers) and the child side (the
worker island) both use these helpers, so they need only the standard library.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parent.parent
LOG_HEAD_BYTES = 1 << 20  # kept on disk
LOG_TAIL_BYTES = 16 << 10  # kept in memory
TAIL_CHARS = 4000  # returned in the response


class CappedLog:
    """Keeps the first LOG_HEAD_BYTES in a file and the last LOG_TAIL_BYTES in memory."""

    def __init__(
        self, path: Path, head_bytes: int = LOG_HEAD_BYTES, tail_bytes: int = LOG_TAIL_BYTES
    ) -> None:
        self.path = path
        self.head_bytes = head_bytes
        self.written = 0
        self.total = 0
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.tail_bytes = tail_bytes
        self._file = open(path, "wb")  # noqa: SIM115 - lives as long as the log; close() closes it

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.written < self.head_bytes:
            part = chunk[: self.head_bytes - self.written]
            self._file.write(part)
            self._file.flush()
            self.written += len(part)
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        while self.tail_size - len(self.tail[0]) >= self.tail_bytes:
            self.tail_size -= len(self.tail.popleft())

    def close(self) -> None:
        if self.total > self.written:
            self._file.write(f"\n[... {self.total - self.written} more bytes not kept ...]\n".encode())
        self._file.close()

    def tail_text(self, chars: int = TAIL_CHARS) -> str:
        """The last `chars` bytes of output as text, saying how much came before."""
        data = b"".join(self.tail)[-chars:]
        text = data.decode(errors="replace")
        before = self.total - len(data)
        return f"[... {before} bytes before ...]\n{text}" if before > 0 else text


def drain(stream: IO[bytes], log: CappedLog) -> None:
    """Copy a child's output pipe into `log` until the child closes it (run it in a thread)."""
    fd = stream.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        log.write(chunk)


def kill_group(pid: int) -> None:
    """SIGKILL a process group (the child started with start_new_session=True and all it spawned)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def wait_then_kill_group(proc: subprocess.Popen[Any], timeout_s: float) -> bool:
    """Wait up to timeout_s, then end the child's whole group either way; True when it timed out.

    Killing the group even after a clean exit ends whatever the child left running behind it.
    """
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        kill_group(proc.pid)
        proc.wait()
    return timed_out


def signal_name(returncode: int) -> str:
    """'SIGSEGV' for a child killed by a signal (a negative return code)."""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def repo_env() -> dict[str, str]:
    """This process's environment with the repository first on PYTHONPATH (for `python -m tools...`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file, or None when it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `path` through a temporary file and a rename: a reader never sees half of it."""
    tmp = f"{os.fspath(path)}.tmp"
    Path(tmp).write_text(text)
    os.replace(tmp, path)


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity set on Linux)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
