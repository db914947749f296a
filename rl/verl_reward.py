"""verl's reward hook over the reward core, and the skill datasets as verl parquet.

verl loads this file by path (`reward.custom_reward_function.path=<repo>/rl/verl_reward.py`,
`name=compute_score`), so it uses absolute imports only and needs the repository on PYTHONPATH.
For every response it calls

    compute_score(data_source, solution_str, ground_truth, extra_info) -> {"score": total, ...}

with `data_source` stitchcuda/skill1 or stitchcuda/skill2, `ground_truth` the verified reference
program (or ""; the reward never compares with it: the verifier decides), and `extra_info` the
row's task fields (problem, plan, previous program, feedback). The other keys of the answer (rule,
each rubric dimension, hacked) are logged by verl. Settings come from the environment of the
process verl runs the reward in: STITCHCUDA_RL_RULE (auto, gpu, build, static), STITCHCUDA_RL_JUDGE
(1: the judge role scores the rubric), STITCHCUDA_RL_TIMEOUT_S, STITCHCUDA_RL_PERF_TRIALS, and
STITCHCUDA_EVAL_URLS (evaluation servers on the timing GPUs; see rl/eval_server.py).

Parquet columns (`stitchcuda rl verl-data DIR --out OUT`): data_source, prompt (chat messages),
ability, reward_model {style: rule, ground_truth}, extra_info {...}.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rl.reward import DIMENSIONS, RewardSettings, RuleSettings
from rl.reward.batch import RewardService
from rl.reward.core import task_from_source
from rl.reward.sample import Sample

SOURCES = {"stitchcuda/skill1": "write", "stitchcuda/skill2": "revise"}
EXTRA_KEYS = ("problem_name", "problem_source", "level", "plan", "mode", "previous_program", "feedback")

_service: RewardService | None = None
_service_lock = threading.Lock()


class VerlDataError(ValueError):
    """A dataset folder without skill files, or a row verl cannot score."""


def settings_from_environment(environ: Mapping[str, str] | None = None) -> RewardSettings:
    env = os.environ if environ is None else environ
    from rl.eval_server import remote_evaluator
    from rl.reward.judge import Judge

    rule = RuleSettings(
        mode=env.get("STITCHCUDA_RL_RULE", "auto"),  # type: ignore[arg-type]
        timeout_s=float(env.get("STITCHCUDA_RL_TIMEOUT_S", "300")),
        perf_trials=int(env.get("STITCHCUDA_RL_PERF_TRIALS", "30")),
    )
    urls = [u.strip() for u in env.get("STITCHCUDA_EVAL_URLS", "").split(",") if u.strip()]
    return RewardSettings(
        rule=rule,
        judge=Judge() if env.get("STITCHCUDA_RL_JUDGE", "0") == "1" else None,
        evaluator=remote_evaluator(urls, rule.timeout_s) if urls else None,
    )


def service() -> RewardService:
    """One RewardService per process (its memo spans the whole run)."""
    global _service
    with _service_lock:
        if _service is None:
            _service = RewardService(settings_from_environment(), workers=1)
        return _service


def sample_from_row(data_source: str, solution_str: str, extra_info: Mapping[str, Any]) -> Sample:
    from graph.artifacts import Feedback, Plan

    if data_source not in SOURCES:
        raise VerlDataError(f"data_source {data_source!r} is not one of {', '.join(SOURCES)}")
    missing = [k for k in ("problem_name", "problem_source", "plan") if not extra_info.get(k)]
    if missing:
        raise VerlDataError(f"extra_info lacks {', '.join(missing)}")
    feedback = extra_info.get("feedback") or ""
    return Sample(
        task=task_from_source(
            extra_info["problem_name"], extra_info["problem_source"], extra_info.get("level")
        ),
        plan=Plan.model_validate(json.loads(extra_info["plan"])),
        skill=SOURCES[data_source],  # type: ignore[arg-type]
        completion=solution_str,
        previous=extra_info.get("previous_program") or None,
        feedback=Feedback.model_validate(json.loads(feedback)) if feedback else None,
        mode=extra_info.get("mode") or "write",
    )


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | None = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl's reward: the total as "score", every component beside it."""
    sample = sample_from_row(data_source, solution_str, extra_info or {})
    result = service().score_many([sample])[0]
    scores = {"score": result.total, "rule": result.rule.score, "rubric": result.rubric.aggregate}
    scores |= {name: result.component(name) for name in DIMENSIONS}
    scores["hacked"] = 1.0 if result.hacked else 0.0
    return scores


def verl_row(row: dict[str, Any]) -> dict[str, Any]:
    """One skill-dataset row in verl's layout."""
    extra = {key: row.get(key) or "" for key in EXTRA_KEYS}
    extra["id"] = row["id"]
    return {
        "data_source": row["data_source"],
        "prompt": row["prompt"],
        "ability": "cuda",
        "reward_model": {"style": "rule", "ground_truth": row.get("reference_program") or ""},
        "extra_info": extra,
    }


def write_verl_parquet(
    dataset_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]
) -> dict[str, int]:
    """skill1.jsonl / skill2.jsonl -> OUT/skill1.parquet / OUT/skill2.parquet; {path: rows}."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rl.dataset import SKILL_FILES, read_rows, skill_file

    source, out = Path(dataset_dir), Path(out_dir)
    present = {name: path for name in SKILL_FILES.values() if (path := skill_file(source, name)) is not None}
    if not present:
        raise VerlDataError(f"{source}: no {' or '.join(SKILL_FILES.values())} (plain or .xz)")
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, path in present.items():
        rows = [verl_row(r) for r in read_rows(path)]
        if not rows:
            continue
        target = out / name.replace(".jsonl", ".parquet")
        pq.write_table(pa.Table.from_pylist(rows), target)
        written[str(target)] = len(rows)
    return written
