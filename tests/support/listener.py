"""A real TCP server on 127.0.0.1 that records what reaches it: the sandbox tests' exfiltration target.

Why shared: the escape attempts through the worker (tests/tools/test_sandbox_escapes.py) and the
issue-20 program through the whole graph (tests/tools/test_sandbox_graph.py) both prove that
nothing a sandboxed program sends arrives anywhere.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Listener:
    """A TCP server on 127.0.0.1 that keeps whatever reaches it (bounded: 30 s, 1 MiB)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    self.received.append(conn.recv(1 << 20))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.server.close()
