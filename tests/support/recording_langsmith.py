"""A loopback LangSmith that records the runs the real langsmith client posts, for tests.

It answers `/info` and the run ingest endpoints (multipart, batch, single runs and patches) and
keeps every run by id with its parts merged, so a test can read back names, tags, metadata and the
inputs each model call was sent.
"""

from __future__ import annotations

import json
import threading
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast


class RecordingLangSmith:
    """Answers /info and the run ingest endpoints, keeping every run operation it was sent."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.posts: dict[str, dict[str, Any]] = {}  # run id -> run, its parts merged, patches applied
        self.api_keys: set[str] = set()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RecordingLangSmith:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def runs_named(self, name: str) -> list[dict[str, Any]]:
        return [run for run in self.posts.values() if run.get("name") == name]

    def _apply(self, operation: str, run_id: str, field: str | None, value: Any) -> None:
        with self._lock:
            run = self.posts.setdefault(run_id, {"id": run_id})
            if field is None:
                run.update(value)
            else:
                run[field] = value
            run.setdefault("operations", []).append(operation)

    def _ingest_multipart(self, content_type: str, body: bytes) -> None:
        message = BytesParser().parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
        for part in message.get_payload():
            name = part.get_param("name", header="content-disposition") or ""
            operation, run_id, *field = name.split(".")
            if operation not in ("post", "patch"):
                continue  # feedback, attachments
            self._apply(
                operation,
                run_id,
                field[0] if field else None,
                json.loads(cast(bytes, part.get_payload(decode=True))),
            )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("content-length") or 0))

            def do_GET(self) -> None:
                recorder.requests.append(("GET", self.path))
                if self.path.startswith("/info"):
                    self._answer(200, {"version": "0.0.0-stub", "instance_flags": {}})
                else:
                    self._answer(404, {"detail": "not found"})

            def do_POST(self) -> None:
                body = self._body()
                recorder.requests.append(("POST", self.path))
                recorder.api_keys.add(self.headers.get("x-api-key", ""))
                if self.path.startswith("/runs/multipart"):
                    recorder._ingest_multipart(self.headers["content-type"], body)
                elif self.path.startswith("/runs/batch"):
                    batch = json.loads(body)
                    for run in batch.get("post", []):
                        recorder._apply("post", str(run["id"]), None, run)
                    for run in batch.get("patch", []):
                        recorder._apply("patch", str(run["id"]), None, run)
                elif self.path.rstrip("/") == "/runs":
                    run = json.loads(body)
                    recorder._apply("post", str(run["id"]), None, run)
                self._answer(202, {})

            def do_PATCH(self) -> None:
                body = self._body()
                recorder.requests.append(("PATCH", self.path))
                run_id = self.path.rstrip("/").split("/")[-1]
                recorder._apply("patch", run_id, None, json.loads(body))
                self._answer(202, {})

        return Handler
