"""Escape attempts through the real evaluation worker (`--device cpu`, C++-only programs).

Each attempt (tests/candidates/sandbox/) runs at import in front of the correct affine program,
so without the sandbox every one would pass its trials. Each must be blocked (nothing reaches the
listener, no file appears outside the work directory, no planted secret shows up in the output)
and reported as a `sandbox_violation` error finding, which makes the verdict `hacked`: such a
program is never verified. The listener is a real TCP server on 127.0.0.1 inside this test.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodes.support.worker_client import to_test_result
from tools.evaluate import evaluate
from tools.protocol import EvalRequest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ATTEMPTS = REPO / "tests" / "candidates" / "sandbox"
WORKER = REPO / "tests" / "candidates" / "worker"
SECRET = "sk-planted-4f1d2c9e"


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


@pytest.fixture()
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sandbox-build-cache")


def program(attempt: str, **fill: Any) -> str:
    prelude = (ATTEMPTS / attempt).read_text()
    for key, value in fill.items():
        prelude = prelude.replace(f"__{key.upper()}__", str(value))
    return prelude + "\n" + (WORKER / "affine_ok.py").read_text()


def run(source: str, cache_dir: Path, timeout_s: float = 240) -> dict[str, Any]:
    request = EvalRequest(
        action="verify",
        problem_name="affine",
        problem_source=(WORKER / "affine_problem.py").read_text(),
        candidate_source=source,
        device="cpu",
        perf_trials=5,
        correctness_trials=2,
        cache_dir=str(cache_dir),
    )
    return dict(evaluate(request, timeout_s=timeout_s, sandbox="required"))


def violations(response: dict[str, Any], kind: str) -> list[str]:
    return [
        f["evidence"]
        for f in response.get("findings") or []
        if f["id"] == "sandbox_violation"
        and f["severity"] == "error"
        and f["evidence"].startswith(kind + ":")
    ]


def assert_never_verified(response: dict[str, Any], source: str) -> None:
    test = to_test_result(response, source)  # type: ignore[arg-type]
    assert test.verdict == "hacked"
    assert "sandbox_violation" in {f["id"] for f in test.findings}


@pytest.fixture(scope="module")
def clean_run(cache_dir: Path) -> dict[str, Any]:
    """The correct program alone: builds the extension once for the module, and must stay clean."""
    return run((WORKER / "affine_ok.py").read_text(), cache_dir, timeout_s=300)


def test_the_correct_program_passes_inside_the_sandbox(clean_run: dict[str, Any]) -> None:
    assert clean_run["status"] == "passed", clean_run["message"]
    assert not [f for f in clean_run.get("findings") or [] if f["id"] == "sandbox_violation"]
    layers = clean_run["sandbox"]["layers"]
    assert all(layer["on"] for layer in layers.values()), layers
    assert clean_run["sandbox"]["applied"]["capabilities"] == []


def test_secrets_are_not_in_the_environment_nor_in_other_processes(
    clean_run: dict[str, Any], cache_dir: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("LANGSMITH_API_KEY", SECRET)
    monkeypatch.setenv("STITCHCUDA_CODER_API_KEY", SECRET)
    source = program("env_secret.py", port=listener.port, secret=SECRET)
    response = run(source, cache_dir)
    assert "FOUND {}" in response["stdout_tail"]  # nothing secret in its environ, no other process visible
    assert SECRET not in response["stdout_tail"]
    assert listener.connections == 0 and not listener.received
    assert violations(response, "network"), response.get("findings")
    assert response["status"] == "passed"  # it computed the right answer ...
    assert_never_verified(response, source)  # ... and is still never verified


def test_connecting_out_is_refused_from_python_and_from_c(
    clean_run: dict[str, Any], cache_dir: Path, listener: Listener
) -> None:
    source = program("connect_out.py", port=listener.port)
    response = run(source, cache_dir)
    assert listener.connections == 0 and not listener.received
    refused = violations(response, "network")
    assert any("socket(AF_INET, SOCK_STREAM) refused" in e for e in refused), refused
    assert "c socket failed 13" in response["stdout_tail"]  # EACCES from the filter, not a connection error
    assert_never_verified(response, source)


def test_writing_outside_the_work_directory_is_refused(
    clean_run: dict[str, Any], cache_dir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "stolen.txt"
    source = program("write_outside.py", target=target)
    response = run(source, cache_dir)
    assert not target.exists() and not Path(f"{target}.c").exists()
    assert any(str(target) in e for e in violations(response, "write")), response.get("findings")
    assert_never_verified(response, source)


def test_the_users_ssh_key_cannot_be_read(
    clean_run: dict[str, Any], cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    key = home / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY----- planted")
    monkeypatch.setenv("HOME", str(home))
    source = program("read_ssh.py", target=key)
    response = run(source, cache_dir)
    assert "planted" not in response["stdout_tail"]
    assert any(str(key) in e for e in violations(response, "read")), response.get("findings")
    assert_never_verified(response, source)


@pytest.mark.parametrize(
    ("attempt", "variable", "value", "kind", "evidence"),
    [
        ("fork_bomb.py", "STITCHCUDA_SANDBOX_PROCESSES", "64", "processes", "cap of 64"),
        ("disk_filler.py", "STITCHCUDA_SANDBOX_DISK_MB", "64", "disk", "quota of 64 MiB"),
    ],
)
def test_a_fork_bomb_or_a_disk_filler_is_stopped(
    clean_run: dict[str, Any],
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    attempt: str,
    variable: str,
    value: str,
    kind: str,
    evidence: str,
) -> None:
    monkeypatch.setenv(variable, value)
    response = run(program(attempt), cache_dir, timeout_s=120)
    assert response["status"] == "crashed"
    assert "the sandbox stopped the run" in response["message"]
    assert response["seconds"] < 60  # stopped by the sandbox, not by the wall-time limit
    assert any(evidence in e for e in violations(response, kind)), response.get("findings")


def test_one_growing_file_stops_at_the_file_size_limit(
    clean_run: dict[str, Any], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STITCHCUDA_SANDBOX_FILE_MB", "16")
    source = program("big_file.py")
    response = run(source, cache_dir, timeout_s=120)
    assert "File too large" in response["stdout_tail"]  # EFBIG: Python ignores SIGXFSZ
    assert any("big.bin reached the file-size limit (16 MiB)" in e for e in violations(response, "file_size"))
    assert_never_verified(response, source)
