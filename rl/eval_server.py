"""Evaluation on GPUs set apart for timing: a small HTTP server per GPU, and its client.

Why: on a cluster the reward runs where the trainer runs, but timings are only worth comparing when
nothing else (rollouts, training) shares the GPU. So each timing GPU gets its own server process,

    CUDA_VISIBLE_DEVICES=6 STITCHCUDA_CACHE=/tmp/sc-cache-6 \
        python -m rl.eval_server --host 0.0.0.0 --port 8606

which answers POST /evaluate with the worker protocol (an EvalRequest in, an EvalResponse out) by
running `tools.evaluate.evaluate`, the same isolated worker process as everywhere else. Each server
needs its own cache folder: the worker's device lock lives there. The reward side sets
STITCHCUDA_EVAL_URLS to the servers and `remote_evaluator` sends each request to the least busy one.
Standard library only; the server runs generated code (in the worker), so bind it to a private
network, never a public one.
"""

from __future__ import annotations

import argparse
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tools.protocol import EvalRequest, EvalResponse

PATH = "/evaluate"
MAX_REQUEST_BYTES = 8 << 20


class EvalHandler(BaseHTTPRequestHandler):
    """POST /evaluate: one worker evaluation per request (requests run in their own threads)."""

    evaluate: Callable[[EvalRequest], EvalResponse]

    def do_POST(self) -> None:  # noqa: N802 - the http.server method name
        if self.path != PATH:
            self._answer(404, {"error": f"POST {PATH} only"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_REQUEST_BYTES:
            self._answer(400, {"error": f"a JSON body of 1 to {MAX_REQUEST_BYTES} bytes is required"})
            return
        try:
            request = json.loads(self.rfile.read(length))
        except ValueError as exc:
            self._answer(400, {"error": f"not JSON: {exc}"})
            return
        if not isinstance(request, dict):
            self._answer(400, {"error": "expected a JSON object"})
            return
        self._answer(200, dict(type(self).evaluate(request)))  # type: ignore[arg-type]

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def make_server(host: str, port: int, timeout_s: float = 600.0) -> ThreadingHTTPServer:
    """A server answering with local worker evaluations (port 0: any free port)."""
    from tools.evaluate import evaluate

    handler = type(
        "BoundEvalHandler",
        (EvalHandler,),
        {
            "evaluate": staticmethod(
                lambda request: evaluate(request, timeout_s=request.get("timeout_s", timeout_s))
            )
        },
    )
    return ThreadingHTTPServer((host, port), handler)


def remote_evaluator(urls: Sequence[str], timeout_s: float) -> Callable[[EvalRequest], EvalResponse]:
    """Send each request to the server with the fewest requests in flight; failures become `crashed`."""
    if not urls:
        raise ValueError("no evaluation server URLs given")
    busy = {url.rstrip("/"): 0 for url in urls}
    lock = threading.Lock()

    def evaluate(request: EvalRequest) -> EvalResponse:
        with lock:
            url = min(busy, key=busy.__getitem__)
            busy[url] += 1
        try:
            body = json.dumps(request).encode()
            post = urllib.request.Request(
                url + PATH, data=body, headers={"Content-Type": "application/json"}, method="POST"
            )
            with urllib.request.urlopen(post, timeout=timeout_s + 60) as reply:
                return json.loads(reply.read())  # type: ignore[no-any-return]
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return EvalResponse(status="crashed", message=f"evaluation server {url}: {exc}", seconds=0.0)
        finally:
            with lock:
                busy[url] -= 1

    return evaluate


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.eval_server", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=8606)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per evaluation at most")
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port, args.timeout)
    print(f"evaluating on http://{args.host}:{server.server_address[1]}{PATH}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
