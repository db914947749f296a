"""verl's reward hook on the starter dataset's rows, without verl installed; the evaluation server."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rl import verl_reward
from rl.dataset import read_rows
from rl.eval_server import make_server, remote_evaluator
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
    answer = next(r["answer"] for r in read_rows(STARTER / "skill1.jsonl") if r["problem_name"] == "1_ReLU")
    good = verl_reward.compute_score(
        relu["data_source"], answer, relu["reward_model"]["ground_truth"], relu["extra_info"]
    )
    junk = verl_reward.compute_score(relu["data_source"], "no program here", "", relu["extra_info"])
    assert {"score", "rule", "rubric", "hacked", *DIMENSIONS} <= set(good)
    assert good["score"] > 0 and good["hacked"] == 0.0 and junk["score"] == 0.0
    # the offline program of a problem it leaves to PyTorch is no honest kernel: the reward says hack
    pool = by_name["10_MaxPool2d"]
    pool_answer = next(
        r["answer"] for r in read_rows(STARTER / "skill1.jsonl") if r["problem_name"] == "10_MaxPool2d"
    )
    assert verl_reward.compute_score(pool["data_source"], pool_answer, "", pool["extra_info"])["score"] < 0


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
