"""Servers the tests start as subprocesses: a free loopback port, and the exports serve-local prints."""

from __future__ import annotations

import queue
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Iterable


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def printed_exports(
    process: subprocess.Popen[str], names: Iterable[str], deadline_s: float
) -> dict[str, str]:
    """The `export NAME=VALUE` lines `stitchcuda llm serve-local` prints on stdout once its server is
    ready, read until every one of `names` came, the output ended or the deadline passed (the
    caller compares what came with what it expects)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    wanted = set(names)
    exports: dict[str, str] = {}
    deadline = time.monotonic() + deadline_s
    while wanted - set(exports):
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        words = shlex.split(line)
        assert words[0] == "export" and len(words) == 2, f"serve-local printed {line!r} on stdout"
        name, _, value = words[1].partition("=")
        exports[name] = value
    return exports
