"""The parent side of the evaluation worker: run one request in a fresh, killable process.

Why: the graph must survive whatever a candidate does. The worker runs as `python -m tools.worker`
in a new session (its own process group, so the compiler and anything the candidate spawns die with
it), with a private temp directory as TMPDIR and TORCH_EXTENSIONS_DIR, and under a wall-time
limit, inside the sandbox (tools.sandbox: an allowlisted environment, no network, a filesystem
policy, rlimits; what it refuses comes back as `sandbox_violation` findings). Its stdout and stderr are drained by a thread into a capped log (the head on disk, the tail
in memory), so a candidate printing in a loop costs neither memory nor disk. Candidate failures of
every kind come back as a status; `evaluate` itself never raises for them. Standard library only.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tools.protocol import EvalRequest, EvalResponse
from tools.sandbox import Sandbox, SandboxSettings

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT_S = 600.0
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


def _drain(stream: Any, log: CappedLog) -> None:
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


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file, or None when it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _worker_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmp)
    env["TORCH_EXTENSIONS_DIR"] = str(tmp / "torch_extensions")
    env["PYTHONFAULTHANDLER"] = "1"  # a segfault leaves a Python traceback in the log
    env["PYTHONUNBUFFERED"] = "1"  # prints reach the log even when the worker is killed
    return env


def evaluate(
    request: EvalRequest,
    timeout_s: float | None = None,
    *,
    python: str = sys.executable,
    log_path: str | os.PathLike[str] | None = None,
    sandbox: str | None = None,
) -> EvalResponse:
    """Run the worker on `request` and return its response (status timeout or crashed if it had none).

    timeout_s: wall-time limit for the whole worker run, start-up and build included (default:
    request["timeout_s"], else 600). log_path: keep the worker's capped output log there.
    sandbox: auto, required or off (default $STITCHCUDA_SANDBOX, else auto); raises SandboxError
    when `required` meets a platform without every layer.
    """
    limit = float(timeout_s if timeout_s is not None else request.get("timeout_s", DEFAULT_TIMEOUT_S))
    request = EvalRequest(**request)
    request["timeout_s"] = limit
    request["deadline"] = time.time() + limit  # the worker budgets its timing loop against it
    settings = SandboxSettings.resolve(sandbox, device=request.get("device", "cuda"), timeout_s=limit)
    tmp = Path(tempfile.mkdtemp(prefix="stitch-eval-"))
    try:
        box = Sandbox(tmp, settings, caches=[request["cache_dir"]] if request.get("cache_dir") else [])
        with box:
            response = _evaluate_in(tmp, request, limit, python, Path(log_path) if log_path else None, box)
        return box.annotate(response)  # type: ignore[arg-type,return-value]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _evaluate_in(
    tmp: Path, request: EvalRequest, limit: float, python: str, keep_log: Path | None, box: Sandbox
) -> EvalResponse:
    request_path, response_path, progress_path = (
        tmp / "request.json",
        tmp / "response.json",
        tmp / "progress.json",
    )
    request_path.write_text(json.dumps(request))
    work = tmp / "work"
    work.mkdir()
    log = CappedLog(tmp / "worker.log")
    command = [
        python,
        "-m",
        "tools.worker",
        "--request",
        str(request_path),
        "--response",
        str(response_path),
        "--progress",
        str(progress_path),
    ]
    started = time.monotonic()
    try:
        proc = box.popen(
            command,
            cwd=work,
            env=_worker_env(work),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except OSError as exc:
        log.close()
        message = f"cannot start the worker ({python}): {exc}"
        return EvalResponse(status="crashed", message=message, phase="starting the worker", seconds=0.0)
    assert proc.stdout is not None
    drain = threading.Thread(target=_drain, args=(proc.stdout, log), daemon=True)
    drain.start()
    try:
        timed_out = wait_then_kill_group(proc, limit)  # also ends whatever the candidate left running
    finally:
        drain.join(timeout=5)
        proc.stdout.close()
        log.close()
    seconds = round(time.monotonic() - started, 3)
    if keep_log is not None:
        keep_log.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log.path, keep_log)

    progress = read_json(progress_path) or {}
    partial: dict[str, Any] = dict(progress.get("response") or {})
    phase = str(progress.get("phase") or "starting the worker")
    response = None if timed_out else read_json(response_path)
    if timed_out:
        response = {**partial, "status": "timeout", "message": f"timed out after {limit:g} s while {phase}"}
    elif response is None:
        if proc.returncode < 0:
            how = f"died with {_signal_name(proc.returncode)}"
        else:
            how = f"exited with code {proc.returncode} without an answer"
        last = [line for line in log.tail_text(1500).splitlines() if line.strip()][-12:]
        response = {
            **partial,
            "status": "crashed",
            "message": "\n".join([f"the worker {how} while {phase}", *last]),
        }
    response["phase"] = response.get("phase") or phase
    response["seconds"] = seconds
    response["stdout_tail"] = log.tail_text()
    return response  # type: ignore[return-value]
