"""Start and stop `transformers serve` on the local model, and say what to export to use it.

Why a subprocess of the real server (not one written here): the point is to meet a real
OpenAI-compatible server, with its own chat template handling, request validation and quirks.
`LocalServer` starts `python -m transformers.cli.transformers serve CHECKPOINT` with the hub kept
offline, waits until `/v1/models` lists the preloaded model (the server loads it before it
listens), and stops the whole process group on exit. Its output goes to a log file, whose tail is
quoted when the server dies before it is ready.

What the server is known to do (transformers 5.24): it accepts `response_format` and
`tool_choice` but ignores them (a warning in its log), so structured output must be asked for as
text; without `max_tokens` it generates up to 1024 tokens; it does not check the prompt against
the model's 8192-token context.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nodes.llm.local_model import INSTALL_HINT, LocalModelError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
READY_TIMEOUT_S = 300.0

# Settings that suit a small model on a CPU: structured output as text (the server ignores the
# other two methods), answers capped so each comes back in minutes, and no client retries: the
# server keeps generating an answer whose client gave up, so a retry only queues a second one.
RECOMMENDED_SETTINGS: dict[str, str] = {
    "STITCHCUDA_LLM_STRUCTURED_OUTPUT": "text",
    "STITCHCUDA_LLM_MAX_TOKENS": "768",
    "STITCHCUDA_LLM_TIMEOUT_S": "600",
    "STITCHCUDA_LLM_MAX_RETRIES": "0",
    "STITCHCUDA_LLM_TEMPERATURE": "0",
}


def offline_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: no hub downloads, no update check, no telemetry."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    return env


def serve_command(checkpoint: Path, host: str, port: int, dtype: str = "float32") -> list[str]:
    """The `transformers serve` command line, run with this interpreter (so the same environment)."""
    return [
        sys.executable, "-m", "transformers.cli.transformers", "serve", str(checkpoint),
        "--host", host, "--port", str(port), "--dtype", dtype, "--log-level", "warning",
    ]  # fmt: skip


@dataclass(frozen=True)
class Endpoint:
    """What a client needs: the base URL (ending in /v1) and the model name the server answers to."""

    base_url: str
    model: str

    def exports(self, recommended: bool = True) -> dict[str, str]:
        """Environment variables that point the LLM policy at this endpoint."""
        values = {
            "STITCHCUDA_LLM_BASE_URL": self.base_url,
            "STITCHCUDA_LLM_MODEL": self.model,
            "OPENAI_API_KEY": "EMPTY",
        }
        return values | (RECOMMENDED_SETTINGS if recommended else {})


def listed_models(base_url: str, timeout_s: float = 2.0) -> list[str]:
    """The model ids `/v1/models` lists; OSError while nothing answers there."""
    with urllib.request.urlopen(f"{base_url}/models", timeout=timeout_s) as response:
        payload = json.load(response)
    return [str(entry.get("id")) for entry in payload.get("data", [])]


class LocalServer:
    """`transformers serve` on `checkpoint` in its own process group; a context manager."""

    def __init__(
        self,
        checkpoint: Path,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        dtype: str = "float32",
        log_path: Path | None = None,
    ) -> None:
        self.checkpoint = checkpoint
        self.endpoint = Endpoint(base_url=f"http://{host}:{port}/v1", model=str(checkpoint))
        self.command = serve_command(checkpoint, host, port, dtype)
        self.log_path = log_path or checkpoint.parent / f"serve-{port}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, ready_timeout_s: float = READY_TIMEOUT_S) -> Endpoint:
        """Start the server and wait until it lists the model; `LocalModelError` if it does not."""
        try:
            taken = listed_models(self.endpoint.base_url, timeout_s=1.0)
        except OSError:
            taken = None
        if taken is not None:
            raise LocalModelError(
                f"something already answers at {self.endpoint.base_url} (models: {', '.join(taken) or 'none'}); "
                "pick another --port"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=offline_environment(),
            start_new_session=True,  # its own process group, so stop() ends its workers too
        )
        self._wait_ready(ready_timeout_s)
        return self.endpoint

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            code = self.process.poll()
            if code is not None:
                raise LocalModelError(
                    f"transformers serve exited with code {code} before it was ready; "
                    f"its log ({self.log_path}) ends with:\n{self.log_tail()}\n"
                    f"(is transformers[serving] installed? {INSTALL_HINT})"
                )
            try:
                if self.endpoint.model in listed_models(self.endpoint.base_url):
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        self.stop()
        raise LocalModelError(
            f"transformers serve was not ready at {self.endpoint.base_url} within {timeout_s:.0f} s; "
            f"its log ({self.log_path}) ends with:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def wait(self) -> int:
        """Block until the server exits (the foreground `serve-local`)."""
        assert self.process is not None
        return self.process.wait()

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the server's process group, then SIGKILL what is left after `grace_s`."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Endpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
