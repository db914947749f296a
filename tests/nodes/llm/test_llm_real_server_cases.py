"""What the real run against SmolLM2 behind `transformers serve` met, replayed fast over real HTTP.

The real run (test_llm_local_run.py, docs/llm.md) takes minutes per answer, so each thing it
exposed is also played here through langchain-openai against a loopback server: serve-local's
exports reaching the wire as the server reads them, the recorded planner answer cut at the token
limit, and a server that goes away in the middle of an answer. The `stitchcuda llm serve-local`
command itself runs here too, over a stand-in for `transformers serve` that answers on the same
routes, so its plumbing (what it prints, Ctrl-C, the server's process group) is checked in every
test run and not only in the opted-in real one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.llm_answers import RELU_PLAN
from support.llm_stub_server import Reply, StubServer
from support.serving import free_port, printed_exports
from test_llm_policy import PLAN, TASK, OfflineDouble, make_policy

from graph.context import Context
from nodes.llm.call_log import collecting
from nodes.llm.errors import LLMCallError
from nodes.llm.local_server import RECOMMENDED_SETTINGS, Endpoint, listed_models
from nodes.llm.policy import LLMPolicy

REPO = Path(__file__).resolve().parents[3]
SERVED = "/models/SmolLM2-135M-Instruct"  # transformers serve names a model by its checkpoint path


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as stub:
        yield stub


def test_serve_locals_exports_reach_the_wire_as_transformers_serve_reads_them(server: StubServer) -> None:
    """Only the environment serve-local prints: text structured output, 768 tokens, greedy, no retry."""
    exports = Endpoint(server.url, SERVED).exports()
    policy = LLMPolicy(Context(policy="llm"), offline_factory=OfflineDouble, environ=exports)
    server.add(Reply.text("The plan:\n```json\n" + json.dumps(RELU_PLAN) + "\n```"))
    with collecting() as calls:
        plan = policy.plan(TASK, None)
    (request,) = server.requests  # one request: the ignored methods are never tried
    body = request.body
    assert body["model"] == SERVED and request.path.endswith("/chat/completions")
    assert body["max_completion_tokens"] == int(RECOMMENDED_SETTINGS["STITCHCUDA_LLM_MAX_TOKENS"]) == 768
    assert "max_tokens" not in body  # deprecated; transformers serve reads max_completion_tokens first
    assert body["temperature"] == 0  # sent, not dropped: the server turns 0 into greedy decoding
    assert "response_format" not in body and "tools" not in body and "tool_choice" not in body
    assert {k.lower(): v for k, v in request.headers.items()}["authorization"] == "Bearer EMPTY"
    assert "via text" in plan.notes
    assert [(c["method"], c["outcome"], c["model"]) for c in calls] == [("text", "repaired", SERVED)]
    assert calls[0]["detail"] == "took the JSON object out of a ```json block"


def test_the_recorded_planner_answer_cut_at_the_token_limit_falls_back_to_the_offline_plan(
    server: StubServer,
) -> None:
    """Call 1 of the recorded run: a plan in text, 768 tokens, finish `length`, JSON never closed."""
    cut = "```json\n" + json.dumps(RELU_PLAN, indent=2)[:700]
    server.add(Reply.text(cut, finish_reason="length"))
    with collecting() as calls:
        plan = make_policy(server, llm_structured_output="text").plan(TASK, None)
    assert len(server.requests) == 1
    assert plan.notes.startswith("offline plan") and "planner model's answer was unusable" in plan.notes
    (call,) = calls
    assert (call["method"], call["outcome"], call["finish_reason"]) == ("text", "rejected", "length")
    assert call["detail"] == "the answer hit the token limit before the JSON was complete"
    assert call["answer_chars"] == len(cut) and call["latency_s"] > 0


class HangUp:
    """Accepts a request, reads it, and closes the connection without an answer: a server stopped
    (Ctrl-C on serve-local) while it was generating."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.requests = 0
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                self.requests += 1
                time.sleep(0.2)  # "generating"

    def close(self) -> None:
        self.sock.close()


def test_a_server_that_goes_away_mid_answer_is_a_failed_call_naming_the_endpoint(tmp_path: Path) -> None:
    hang_up = HangUp()
    try:
        context = Context(policy="llm", llm_model=SERVED, llm_base_url=hang_up.url, llm_max_retries=0)
        policy = LLMPolicy(context, offline_factory=OfflineDouble, environ={"OPENAI_API_KEY": "EMPTY"})
        with collecting() as calls, pytest.raises(LLMCallError) as info:
            policy.write(TASK, PLAN, 2)
    finally:
        hang_up.close()
    message = str(info.value)
    assert f"coder model '{SERVED}' at {hang_up.url}" in message and "(1 attempt)" in message
    assert "Connection error" in message or "cannot connect" in message
    assert hang_up.requests == 1  # MAX_RETRIES=0: no second generation queued behind the first
    (call,) = calls
    assert (call["role"], call["mode"], call["candidate"], call["outcome"]) == ("coder", "write", 2, "failed")
    assert call["answer_chars"] == 0 and call["output_tokens"] is None and call["detail"] == message


# A stand-in for `transformers serve CHECKPOINT --host H --port P ...`: the routes serve-local and the
# policy use, the model named by the checkpoint path, and a log line so its log file is not empty.
FAKE_SERVE = textwrap.dedent(
    """
    import json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    checkpoint, host, port = sys.argv[1], sys.argv[sys.argv.index("--host") + 1], sys.argv[sys.argv.index("--port") + 1]
    class Handler(BaseHTTPRequestHandler):
        def _send(self, payload):
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        def do_GET(self):
            self._send({"object": "list", "data": [{"id": checkpoint, "object": "model"}]})
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = "echo: " + body["messages"][-1]["content"]
            self._send({"id": "c1", "object": "chat.completion", "created": 0, "model": checkpoint,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
        def log_message(self, *args):
            pass
    print("fake transformers serve on", host, port, flush=True)
    ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
    """
)

SERVE_LOCAL = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import nodes.llm.cli as cli
    import nodes.llm.local_server as local_server
    checkpoint, fake = Path(sys.argv[1]), sys.argv[2]
    cli.prepare_checkpoint = lambda target=None, progress=print: checkpoint  # no conversion here
    local_server.serve_command = lambda ckpt, host, port, dtype="float32": [
        sys.executable, "-c", fake, str(ckpt), "--host", host, "--port", str(port)]
    from graph.cli import main
    sys.exit(main(["llm", "serve-local", "--port", sys.argv[3]]))
    """
)


def test_serve_local_prints_the_exports_serves_through_langchain_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    checkpoint = tmp_path / "models" / "SmolLM2-135M-Instruct"
    checkpoint.mkdir(parents=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STITCHCUDA_", "OPENAI_"))}
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE_LOCAL, str(checkpoint), FAKE_SERVE, str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C, even from a background job
    )
    try:
        names = ("STITCHCUDA_LLM_BASE_URL", "STITCHCUDA_LLM_MODEL", "OPENAI_API_KEY", *RECOMMENDED_SETTINGS)
        exports = printed_exports(process, names, deadline_s=60)
        base_url = f"http://127.0.0.1:{port}/v1"
        assert exports == {
            "STITCHCUDA_LLM_BASE_URL": base_url,
            "STITCHCUDA_LLM_MODEL": str(checkpoint),
            "OPENAI_API_KEY": "EMPTY",
            **RECOMMENDED_SETTINGS,
        }
        chat = ChatOpenAI(
            model=exports["STITCHCUDA_LLM_MODEL"],
            base_url=exports["STITCHCUDA_LLM_BASE_URL"],
            api_key=SecretStr(exports["OPENAI_API_KEY"]),
            max_retries=0,
            timeout=10,
        )
        answer = chat.invoke([("human", "hello")])
        assert answer.content == "echo: hello"
        assert (answer.usage_metadata or {}).get("output_tokens") == 2
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = process.stderr.read() if process.stderr else ""
    assert "serving " + str(checkpoint) + " at " + base_url in stderr
    assert "stopping the server" in stderr and "Traceback" not in stderr, stderr
    with pytest.raises(OSError):  # the server (its own process group) stopped with the command
        listed_models(base_url, timeout_s=2.0)
    log = tmp_path / "models" / f"serve-{port}.log"
    assert "fake transformers serve on 127.0.0.1" in log.read_text()  # the server's output went to the log
