"""verl's reward hook on the starter dataset's rows, without verl installed; the evaluation servers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import FIXTURES
from support.scripted_policy import CORRECT_CPP

from rl import verl_reward
from rl.dataset import read_rows
from rl.eval_server import make_server, remote_evaluator
from rl.reward import RuleSettings, make_sample
from rl.reward.rule import eval_request
from rl.reward.sample import DIMENSIONS

REPO = Path(__file__).resolve().parents[2]
STARTER = REPO / "rl" / "data" / "starter"


@pytest.fixture
def static_rule(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("STITCHCUDA_RL_RULE", "static")
    monkeypatch.delenv("STITCHCUDA_EVAL_URLS", raising=False)
    monkeypatch.setattr(verl_reward, "_service", None)
    yield
    verl_reward._service = None


def test_compute_score_on_parquet_rows(static_rule: None, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")

    written = verl_reward.write_verl_parquet(STARTER, tmp_path)
    (path,) = [p for p in written if p.endswith("skill1.parquet")]
    rows = pq.read_table(path).to_pylist()
    assert len(rows) == written[path] >= 20
    assert {"data_source", "prompt", "ability", "reward_model", "extra_info"} <= set(rows[0])
    by_name = {row["extra_info"]["problem_name"]: row for row in rows}
    relu = by_name["1_ReLU"]
    answer = next(
        r["answer"] for r in read_rows(STARTER / "skill1.jsonl.xz") if r["problem_name"] == "1_ReLU"
    )
    good = verl_reward.compute_score(
        relu["data_source"], answer, relu["reward_model"]["ground_truth"], relu["extra_info"]
    )
    junk = verl_reward.compute_score(relu["data_source"], "no program here", "", relu["extra_info"])
    assert {"score", "rule", "rubric", "hacked", *DIMENSIONS} <= set(good)
    assert good["score"] > 0 and good["hacked"] == 0.0 and junk["score"] == 0.0
    # the offline program of a problem it leaves to PyTorch is no honest kernel: the reward says hack
    pool = by_name["10_MaxPool2d"]
    pool_answer = next(
        r["answer"] for r in read_rows(STARTER / "skill1.jsonl.xz") if r["problem_name"] == "10_MaxPool2d"
    )
    assert verl_reward.compute_score(pool["data_source"], pool_answer, "", pool["extra_info"])["score"] < 0


def test_verls_own_loader_finds_the_hook_where_the_recipe_points(static_rule: None, tmp_path: Path) -> None:
    # verl 0.9 reads reward.custom_reward_function (the recipe's keys); runs where verl is installed
    reward = pytest.importorskip("verl.trainer.ppo.reward")
    omegaconf = pytest.importorskip("omegaconf")
    recipe = (REPO / "rl" / "verl" / "qwen3_32b_lora.sh").read_text()
    assert 'reward.custom_reward_function.path="$repo/rl/verl_reward.py"' in recipe
    config = omegaconf.OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": str(REPO / "rl" / "verl_reward.py"),
                    "name": "compute_score",
                }
            }
        }
    )
    compute_score = reward.get_custom_reward_fn(config)
    verl_reward.write_verl_parquet(STARTER, tmp_path)
    rows = pytest.importorskip("pyarrow.parquet").read_table(tmp_path / "skill1.parquet").to_pylist()
    relu = next(r for r in rows if r["extra_info"]["problem_name"] == "1_ReLU")
    answer = next(
        r["answer"] for r in read_rows(STARTER / "skill1.jsonl.xz") if r["problem_name"] == "1_ReLU"
    )
    scores = compute_score(
        data_source=relu["data_source"],
        solution_str=answer,
        ground_truth=relu["reward_model"]["ground_truth"],
        extra_info=relu["extra_info"],
    )
    assert scores["score"] > 0 and {"rule", "rubric", "hacked", *DIMENSIONS} <= set(scores)


def test_bad_rows_are_refused(static_rule: None) -> None:
    with pytest.raises(verl_reward.VerlDataError, match="data_source"):
        verl_reward.compute_score(
            "gsm8k", "x", "", {"problem_name": "p", "problem_source": "s", "plan": "{}"}
        )
    with pytest.raises(verl_reward.VerlDataError, match="extra_info lacks"):
        verl_reward.compute_score("stitchcuda/skill1", "x", "", {})


def test_evaluation_server_answers_with_the_worker_over_http() -> None:
    server = make_server("127.0.0.1", 0, timeout_s=120)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        evaluate = remote_evaluator([url], timeout_s=120)
        answer = evaluate({"action": "nonsense", "problem_source": "", "candidate_source": ""})  # type: ignore[typeddict-item]
        assert answer["status"] == "runtime_error" and "unknown action" in answer["message"]
        assert answer["seconds"] > 0  # a real worker process ran
    finally:
        server.shutdown()
        server.server_close()
    down = remote_evaluator([url], timeout_s=5)({"action": "build"})
    assert down["status"] == "crashed" and url in down["message"]


def _free_ports(count: int) -> int:
    """The first of `count` consecutive ports that are free right now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as other:
                    other.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise RuntimeError("no free consecutive ports")


def _wait_until_listening(url: str, deadline: float) -> None:
    while True:
        try:
            urllib.request.urlopen(url + "/", timeout=2)
        except urllib.error.HTTPError:
            return  # it answered (405/501 for GET): the server is up
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
def test_eval_servers_script_serves_each_gpu_with_one_machine_wide_quiet_window(tmp_path: Path) -> None:
    first = _free_ports(2)
    env = {**os.environ, "BIND": "127.0.0.1", "STITCHCUDA_CACHE_ROOT": str(tmp_path / "cache")}
    env.pop("STITCHCUDA_TIMING_WINDOW", None)
    script = REPO / "rl" / "verl" / "eval_servers.sh"
    servers = subprocess.Popen(
        ["bash", str(script), str(first), "2"], cwd=tmp_path, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        urls = [f"http://127.0.0.1:{first + i}" for i in range(2)]
        for url in urls:
            _wait_until_listening(url, time.monotonic() + 120)
        sample = make_sample(str(FIXTURES / "problems" / "scale_relu.py"), "", "write")
        request = eval_request(sample.task, sample.plan, CORRECT_CPP, RuleSettings(mode="build"), "build")
        request["device"] = "cpu"
        answers = [remote_evaluator([url], timeout_s=600)(request) for url in urls]
    finally:
        os.killpg(servers.pid, signal.SIGTERM)  # the script and the servers it started, nothing else
        servers.wait(timeout=60)
    assert [a["status"] for a in answers] == ["passed", "passed"], [a.get("message") for a in answers]
    cache = tmp_path / "cache"
    assert (cache / "gpu0").is_dir() and (cache / "gpu1").is_dir()  # a build cache (and device lock) each
    # both servers' builds went through the one window folder, none through a per-server one
    assert (cache / "window" / "timing-window.lock").is_file()
    assert not list(cache.glob("gpu*/locks/timing-window*"))
