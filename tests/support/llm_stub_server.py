"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

Why a real server: the LLM policy talks to models only through langchain-openai and the openai SDK,
so retries, timeouts, structured-output payloads and error mapping are exercised only when real HTTP
crosses a real socket. The server answers each POST /v1/chat/completions with the next scripted
`Reply` and records every request body, so tests can assert the prompts, `response_format` and
`tools` that were actually sent. When the script runs out it answers 500 with a message saying so,
which a test sees as an extra, unexpected call.

    with StubServer([Reply.text("hello")]) as server:
        ChatOpenAI(base_url=server.url, api_key="EMPTY", model="stub").invoke("hi")
        assert server.requests[0].body["messages"][0]["content"] == "hi"
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer; build it with the class methods."""

    status: int = 200
    content: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    finish_reason: str = "stop"
    error_message: str = ""
    delay_s: float = 0.0
    raw_body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def text(cls, content: str, *, finish_reason: str = "stop", delay_s: float = 0.0) -> Reply:
        """An assistant message with `content`."""
        return cls(content=content, finish_reason=finish_reason, delay_s=delay_s)

    @classmethod
    def json(cls, value: Any) -> Reply:
        """An assistant message whose content is `value` as JSON (a json_schema answer)."""
        return cls(content=json.dumps(value))

    @classmethod
    def tool_call(cls, name: str, arguments: Any) -> Reply:
        """An assistant message calling tool `name` (a function_calling answer)."""
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return cls(tool_name=name, tool_arguments=args, finish_reason="tool_calls")

    @classmethod
    def error(cls, status: int, message: str, *, retry_after_ms: int | None = 5) -> Reply:
        """An OpenAI-style error body; `retry_after_ms` keeps the SDK's retry back-off short."""
        headers = (("retry-after-ms", str(retry_after_ms)),) if retry_after_ms is not None else ()
        return cls(status=status, error_message=message, headers=headers)

    @classmethod
    def garbage(cls) -> Reply:
        """A 200 whose body is not JSON at all (a broken proxy or server)."""
        return cls(raw_body=b"<html>502 upstream hiccup</html>")


@dataclass
class RecordedRequest:
    """What the client sent: path, headers and the parsed JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float = field(default_factory=time.monotonic)

    def text(self) -> str:
        """All message contents joined, for asserting what a prompt contained."""
        parts = []
        for message in self.body.get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
        return "\n".join(parts)


class StubServer:
    """A threaded HTTP server on an ephemeral loopback port replaying a script of replies."""

    def __init__(self, script: list[Reply] | None = None, *, model: str = "stub-model") -> None:
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._script: deque[Reply] = deque(script or [])
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="llm-stub", daemon=True
        )

    @property
    def url(self) -> str:
        """The base_url to give an OpenAI client (ends in /v1)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """Replies not yet used."""
        with self._lock:
            return len(self._script)

    def start(self) -> StubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a slow reply
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- used by the handler -------------------------------------------------------------------

    def _record_and_pop(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.popleft()
        return Reply.error(500, "stub script exhausted: unexpected extra request", retry_after_ms=None)

    def _completion(self, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_name is not None:
            message["tool_calls"] = [
                {
                    "id": f"call_{len(self.requests)}",
                    "type": "function",
                    "function": {"name": reply.tool_name, "arguments": reply.tool_arguments or "{}"},
                }
            ]
        return {
            "id": f"chatcmpl-stub-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }


def _handler_for(server: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            recorded = RecordedRequest(path=self.path, headers=dict(self.headers.items()), body=body)
            reply = server._record_and_pop(recorded)
            if reply.delay_s and server._stopping.wait(reply.delay_s):
                return
            if reply.raw_body is not None:
                self._send_bytes(200, reply.raw_body, "text/html", reply.headers)
            elif reply.status != 200:
                error = {"message": reply.error_message, "type": "stub_error", "code": reply.status}
                self._send(reply.status, {"error": error}, reply.headers)
            else:
                self._send(200, server._completion(reply), reply.headers)

        def _send(
            self, status: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()
        ) -> None:
            self._send_bytes(status, json.dumps(payload).encode(), "application/json", headers)

        def _send_bytes(
            self, status: int, data: bytes, content_type: str, headers: tuple[tuple[str, str], ...]
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

    return Handler


def isolate_model_settings(monkeypatch: Any) -> None:
    """Only a test's Context names models and endpoints: drop a developer's STITCHCUDA_*_LLM/role
    settings and OPENAI_BASE_URL from the environment, and give the client a placeholder key."""
    for name in list(os.environ):
        if name.startswith("STITCHCUDA_") and any(
            part in name for part in ("_LLM_", "_PLANNER_", "_CODER_", "_VERIFIER_", "_JUDGE_")
        ):
            monkeypatch.delenv(name)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
