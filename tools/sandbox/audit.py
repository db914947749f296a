"""The Python audit hook of a sandboxed interpreter: report, and refuse, what the policy forbids.

Why, on top of the kernel layers: those refuse silently (EACCES, EROFS, ENOENT), and a program
that swallows the error leaves no trace. The hook sees Python-level attempts before they reach
the kernel: opening a file for writing outside the writable trees, reading a hidden tree (a
home directory, /tmp), connecting or sending to a non-Unix address. It raises PermissionError
for them and sends a report to the parent over the control socket the launcher left open
($STITCHCUDA_SANDBOX_REPORT_FD), so the attempt becomes a `sandbox_violation` finding. Audit
hooks cannot be removed once added (PEP 578); code that bypasses Python (ctypes, C++) is held by
the kernel layers and, for sockets and process creation, reported by the seccomp supervisor.
Standard library only; installed by tools/sandbox/site/sitecustomize.py.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

from tools.sandbox.paths import FilesystemPolicy

POLICY_ENV = "STITCHCUDA_SANDBOX_POLICY"
REPORT_FD_ENV = "STITCHCUDA_SANDBOX_REPORT_FD"
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_installed = False


class _Hook:
    def __init__(self, policy: FilesystemPolicy, report_fd: int | None) -> None:
        self.policy = policy
        self.report_fd = report_fd
        self.busy = False

    def report(self, kind: str, evidence: str) -> None:
        if self.report_fd is None:
            return
        message = json.dumps({"type": "violation", "kind": kind, "evidence": evidence, "pid": os.getpid()})
        try:
            os.write(self.report_fd, message.encode())
        except OSError:
            self.report_fd = None  # closed by the program: the kernel layers still hold

    def refuse(self, kind: str, evidence: str) -> None:
        self.report(kind, evidence)
        raise PermissionError(f"sandbox: {evidence}")

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.busy:
            return
        if event == "open":
            self.busy = True
            try:
                self.check_open(*args[:3])
            finally:
                self.busy = False
        elif event in ("socket.connect", "socket.sendto", "socket.bind"):
            self.check_socket(event, args)

    def check_open(self, path: Any, mode: Any, flags: Any) -> None:
        if isinstance(path, int) or path is None:
            return
        name = os.fsdecode(path)
        full = os.path.normpath(os.path.join(os.getcwd(), name))
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & WRITE_FLAGS
        )
        if writing and not self.policy.may_write(full):
            self.refuse("write", f"opened {full} for writing, outside the writable trees")
        if not writing and not self.policy.may_read(full):
            self.refuse("read", f"read {full}, inside a hidden tree")

    def check_socket(self, event: str, args: tuple[Any, ...]) -> None:
        sock, address = args[0], args[1] if len(args) > 1 else None
        family = getattr(sock, "family", None)
        if family == socket.AF_UNIX or family == getattr(socket, "AF_NETLINK", None):
            return
        verb = event.split(".")[1]
        self.refuse("network", f"{verb} to {address!r} ({getattr(family, 'name', family)})")


def install() -> bool:
    """Add the hook once, from the policy the parent put in the environment; False when there is none."""
    global _installed
    raw = os.environ.get(POLICY_ENV)
    if _installed or not raw:
        return False
    policy = FilesystemPolicy.from_dict(json.loads(raw))
    fd_text = os.environ.get(REPORT_FD_ENV, "")
    sys.addaudithook(_Hook(policy, int(fd_text) if fd_text.isdigit() else None))
    _installed = True
    return True
