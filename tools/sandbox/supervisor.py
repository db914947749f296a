"""The parent's watch over one sandboxed child: seccomp notifications, audit reports, disk use.

Why in the parent: it is the one process the program cannot reach (another PID namespace, or at
least another Landlock domain that may not signal it). A thread here answers every call the
filter sends up (an IP socket, a privileged call, a new process), reads the reports of the
sandboxed interpreters' audit hooks, and checks the run's directory and free disk space several
times a second. What it refuses or stops becomes a Violation; a fork bomb (the process cap reached) or a
disk filler (the directory's quota, or the disk running out under the run) also ends the run.
When the run ends, `end` kills whatever it left running, even a process that left the child's
process group. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.sandbox import seccomp
from tools.sandbox.limits import GIB, MIB, Limits

MAX_VIOLATIONS = 50
DISK_CHECK_S = 0.2  # at least; a scan that takes longer spaces the next ones out (20x its time)
DISK_RESERVE = 1 * GIB  # free space the run may not eat into


@dataclass(frozen=True)
class Violation:
    """One attempt the sandbox refused or stopped: kind (network, write, read, privileged, processes,
    disk, file_size) and the evidence (what, by which process)."""

    kind: str
    evidence: str


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _session(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[3]) if len(fields) > 3 else None


def _pid_namespace(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """False for a zombie (or a process gone): nothing left to kill."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


def run_processes(sid: int | None, namespaces: set[str] | frozenset[str] = frozenset()) -> list[int]:
    """The live processes of one run: those of its session, and those of its own PID namespaces."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if (sid is not None and _session(pid) == sid) or (namespaces and _pid_namespace(pid) in namespaces):
            found.append(pid)
    return found


def processes_in_session(sid: int) -> int:
    return len(run_processes(sid))


def disk_usage(tree: Path) -> int:
    """Bytes allocated under `tree` (sparse files count what they really hold)."""
    total = 0
    stack = [str(tree)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
    return total


def _free(path: Path) -> int:
    try:
        stat = os.statvfs(path)
    except OSError:
        return 1 << 62
    return stat.f_bavail * stat.f_frsize


@dataclass
class Supervisor:
    """Runs in a thread from `start` until `stop`; `violations` and `applied` hold what it saw."""

    control: socket.socket
    limits: Limits
    root: Path
    watched_disks: list[Path]
    names: dict[int, str]
    kill: Callable[[], None]
    violations: list[Violation] = field(default_factory=list)
    applied: dict[str, Any] = field(default_factory=dict)
    launch_error: str = ""
    killed_for: str = ""
    listener: int | None = None
    session: int | None = None  # the child's session id (its pid: it starts a new session)
    ended: int = 0  # processes still alive when the run ended, killed by `end`
    _namespaces: set[str] = field(default_factory=set)  # the run's own PID namespaces, once seen
    _own_namespace: str | None = None
    _ending: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _ready: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self._own_namespace = _pid_namespace("self")
        self._free_at_start = {p: _free(p) for p in self.watched_disks}
        self._thread = threading.Thread(target=self._loop, name="sandbox-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Kill what the run left running (`end`), drain what is still queued, end the thread, close
        the listener."""
        if self._stop.is_set():
            return
        self.end()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.listener is not None:
            with contextlib.suppress(OSError):
                os.close(self.listener)
            self.listener = None

    def end(self, wait_s: float = 5.0) -> None:
        """Kill what the run left behind: every process of its session and of its own PID namespaces.

        A process that moved to a process group of its own (setpgid: allowed, since build tools such
        as ninja use it) escapes the callers' kill of the child's group; without a private PID
        namespace nothing else would end it. New processes are refused from now on.
        """
        self._ending = True
        deadline = time.monotonic() + wait_s
        killed: set[int] = set()
        while time.monotonic() < deadline:
            left = [pid for pid in run_processes(self.session, self._namespaces) if _alive(pid)]
            if not left:
                break
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.02)
        self.ended = len(killed)

    def add(self, kind: str, evidence: str) -> None:
        item = Violation(kind, evidence)
        if item not in self.violations and len(self.violations) < MAX_VIOLATIONS:
            self.violations.append(item)

    def stop_run(self, kind: str, evidence: str) -> None:
        self.add(kind, evidence)
        if not self.killed_for:
            self.killed_for = evidence
            self.kill()

    def _loop(self) -> None:
        next_disk = time.monotonic() + DISK_CHECK_S
        poller = select.poll()
        poller.register(self.control, select.POLLIN)
        watching_listener = False
        while True:
            if self.listener is not None and not watching_listener:
                poller.register(self.listener, select.POLLIN)
                watching_listener = True
            stopping = self._stop.is_set()
            try:
                events = poller.poll(0 if stopping else 200)
            except (OSError, ValueError):
                return
            for fd, mask in events:
                if fd == self.control.fileno():
                    self._read_control()
                elif mask & select.POLLIN:
                    self._answer()
                else:  # POLLHUP: every process under the filter has exited
                    poller.unregister(fd)
            if stopping and not any(mask & select.POLLIN for _, mask in events):
                return
            if time.monotonic() >= next_disk:
                began = time.monotonic()
                self._check_disk()
                next_disk = time.monotonic() + max(DISK_CHECK_S, 20 * (time.monotonic() - began))

    def _read_control(self) -> None:
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.control, 65536, 1)
        except OSError:
            return
        try:
            message = json.loads(data.decode(errors="replace") or "{}")
        except ValueError:
            message = {}
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "ready" and not self._ready.is_set():
            self._ready.set()
            self.applied = dict(message.get("applied") or {})
            if fds:
                self.listener, fds = fds[0], fds[1:]
        elif kind == "launch_error":
            self.launch_error = str(message.get("message", ""))
        elif kind == "violation":
            self.add(
                str(message.get("kind", "unknown")),
                f"{message.get('evidence', '')} (pid {message.get('pid')})",
            )
        for fd in fds:  # only the launcher's first message may carry a descriptor
            os.close(fd)

    def _answer(self) -> None:
        if self.listener is None:
            return
        try:
            note = seccomp.receive(self.listener)
        except OSError:
            return
        if note is None:
            return
        name = self.names.get(note.nr, f"syscall {note.nr}")
        who = f"pid {note.pid} ({_comm(note.pid)})"
        if name == "socket":
            family, kind = note.args[0] & 0xFFFFFFFF, note.args[1] & 0xF
            self.add("network", f"socket({_family(family)}, {_socket_type(kind)}) refused to {who}")
            seccomp.answer(self.listener, note, error=errno.EACCES)
        elif name in ("fork", "vfork", "clone") and (self.killed_for or self._ending):
            seccomp.answer(self.listener, note, error=errno.EAGAIN)  # the run is being stopped
        elif name in ("fork", "vfork", "clone"):
            live = self._live_processes(note.pid)
            if live >= self.limits.processes:
                seccomp.answer(self.listener, note, error=errno.EAGAIN)
                self.stop_run("processes", f"{live} live processes reached the cap of {self.limits.processes}: "
                              f"{name}() by {who} refused and the run stopped (fork bomb)")  # fmt: skip
            else:
                seccomp.answer(self.listener, note, proceed=True)
        else:
            self.add("privileged", f"{name}() refused to {who}")
            seccomp.answer(self.listener, note, error=errno.EPERM)

    def _live_processes(self, pid: int) -> int:
        """The run's live processes, counted by PID namespace when it has its own (a profiled program
        may leave its session there: setsid is refused only outside profilers), else by session."""
        namespace = _pid_namespace(pid)
        if namespace is not None and namespace != self._own_namespace:
            self._namespaces.add(namespace)
            return len(run_processes(None, {namespace}))
        sid = _session(pid)
        return processes_in_session(sid) if sid is not None else 0

    def _check_disk(self) -> None:
        used = disk_usage(self.root)
        if used > self.limits.disk:
            self.stop_run("disk", f"the run's directory holds {used / MIB:.0f} MiB, over its quota of "
                          f"{self.limits.disk / MIB:.0f} MiB: the run was stopped (disk filler)")  # fmt: skip
            return
        for path, at_start in self._free_at_start.items():
            free = _free(path)
            if free < DISK_RESERVE and at_start - free > DISK_RESERVE:
                self.stop_run("disk", f"free space on {path} fell from {at_start / GIB:.1f} to {free / GIB:.1f} GiB "
                              "during the run: it was stopped (disk filler)")  # fmt: skip
                return


def _family(value: int) -> str:
    try:
        return socket.AddressFamily(value).name
    except ValueError:
        return f"family {value}"


def _socket_type(value: int) -> str:
    try:
        return socket.SocketKind(value).name
    except ValueError:
        return f"type {value}"
