"""GRPO on TRL with LoRA, rewarded by the reward core: `stitchcuda rl train --config FILE`.

One async reward function scores a whole step: every completion becomes a Sample (problem, plan,
skill, previous program and feedback come from the dataset's columns), the RewardService runs the
worker evaluations side by side in its thread pool, and each reward component is logged with
`log_metric` (stitchcuda/total, /rule, /rubric, /hacked, /no_program, and each dimension). The
scalar GRPO optimises is `reward.objective`: the total, or one component (a CPU run on a small
model trains skill compliance, which it can learn without a GPU). TRL's log history is appended to
OUTPUT/metrics.jsonl at every logging step; checkpoints are saved every `grpo.save_steps` and a
second run with the same output_dir resumes from the last one.

Config (YAML): model {name, gguf_file, dtype}, data {files, limit, prompt: full|compact, skills},
reward {rule, judge, objective, workers, timeout_s, perf_trials}, lora {r, alpha, dropout,
target_modules}, grpo {any GRPOConfig field}, output_dir, resume, seed. See rl/configs/.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from string import Template
from typing import Any

from rl.reward import DIMENSIONS, RewardSettings, RuleSettings
from rl.reward.batch import RewardService
from rl.reward.core import task_from_source
from rl.reward.sample import Breakdown, Sample

COMPACT_PROMPT = Path(__file__).resolve().parent / "prompts" / "compact_write.md"
TRAINING_MODULES = ("trl", "peft", "datasets", "transformers", "accelerate", "gguf")
OBJECTIVES = ("total", "rule", "rubric", *DIMENSIONS)
METRICS_FILE = "metrics.jsonl"


class TrainConfigError(ValueError):
    """The training config is missing, malformed or names something unknown."""


@dataclass
class ModelConfig:
    name: str = "smollm2"
    gguf_file: str | None = None
    dtype: str = "float32"


@dataclass
class DataConfig:
    files: list[str] = field(default_factory=lambda: ["rl/data/starter/skill1.jsonl.xz"])
    limit: int | None = None
    prompt: str = "full"  # full: the coder's exact messages; compact: a short skill-1 prompt
    skills: list[str] = field(default_factory=lambda: ["write", "revise"])


@dataclass
class RewardConfig:
    rule: str = "auto"
    judge: bool = False
    objective: str = "total"
    workers: int = 4
    timeout_s: float = 300.0
    perf_trials: int = 30


@dataclass
class LoraSettings:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    lora: LoraSettings = field(default_factory=LoraSettings)
    grpo: dict[str, Any] = field(default_factory=dict)
    output_dir: str = "runs/rl"
    resume: bool = True
    seed: int = 0
    threads: int | None = (
        1  # torch CPU threads; None keeps torch's default (see docs/rl.md: 1 is faster on a busy 2-core box)
    )


def _section(cls: type, values: Any, where: str) -> Any:
    if values is None:
        return cls()
    if not isinstance(values, dict):
        raise TrainConfigError(f"{where} must be a mapping")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise TrainConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return cls(**values)


def load_config(path: str | os.PathLike[str]) -> TrainConfig:
    import yaml

    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise TrainConfigError(f"config {path}: cannot be read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise TrainConfigError(f"config {path}: not YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise TrainConfigError(f"config {path}: expected a mapping at the top")
    sections = {"model": ModelConfig, "data": DataConfig, "reward": RewardConfig, "lora": LoraSettings}
    unknown = sorted(set(raw) - set(sections) - {"grpo", "output_dir", "resume", "seed", "threads"})
    if unknown:
        raise TrainConfigError(f"config {path}: unknown key(s) {', '.join(unknown)}")
    config = TrainConfig(
        **{name: _section(cls, raw.get(name), f"{path}: {name}") for name, cls in sections.items()},
        grpo=dict(raw.get("grpo") or {}),
        output_dir=str(raw.get("output_dir", "runs/rl")),
        resume=bool(raw.get("resume", True)),
        seed=int(raw.get("seed", 0)),
        threads=raw.get("threads", 1),
    )
    if config.reward.objective not in OBJECTIVES:
        raise TrainConfigError(
            f"reward.objective {config.reward.objective!r}: one of {', '.join(OBJECTIVES)}"
        )
    if config.data.prompt not in ("full", "compact"):
        raise TrainConfigError(f"data.prompt {config.data.prompt!r}: full or compact")
    return config


# ----------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------


def compact_prompt(row: dict[str, Any]) -> list[dict[str, str]]:
    """A short skill-1 prompt (the task and the answer format only), for CPU runs on small models."""
    text = Template(COMPACT_PROMPT.read_text(encoding="utf-8")).substitute(task_name=row["problem_name"])
    return [{"role": "user", "content": text}]


def training_rows(data: DataConfig) -> list[dict[str, Any]]:
    """The dataset's rows as GRPO prompts with the columns the reward function reads."""
    from rl.dataset import read_rows

    rows: list[dict[str, Any]] = []
    for name in data.files:
        path = Path(name)
        if not path.is_file():
            raise TrainConfigError(
                f"data.files: {path} does not exist (build one with `stitchcuda rl dataset`)"
            )
        for row in read_rows(path):
            if row["skill"] not in data.skills:
                continue
            compact = data.prompt == "compact" and row["skill"] == "write"
            rows.append(
                {
                    "prompt": compact_prompt(row) if compact else row["prompt"],
                    "problem_name": row["problem_name"],
                    "problem_source": row["problem_source"],
                    "level": row.get("level") or "",
                    "skill": row["skill"],
                    "mode": row["mode"],
                    "plan": row["plan"],
                    "previous_program": row.get("previous_program") or "",
                    "feedback": row.get("feedback") or "",
                }
            )
    if data.limit:
        rows = rows[: data.limit]
    if not rows:
        raise TrainConfigError(f"no rows of skill(s) {', '.join(data.skills)} in {', '.join(data.files)}")
    return rows


# ----------------------------------------------------------------------------------------------
# Reward
# ----------------------------------------------------------------------------------------------


def completion_text(completion: Any) -> str:
    """A completion's text: standard (a string) or conversational (a list of messages)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        last = completion[-1]
        return str(last.get("content", "")) if isinstance(last, dict) else str(last)
    return ""


class SampleFactory:
    """Samples from reward-function columns; tasks, plans and feedback parsed once each."""

    def __init__(self) -> None:
        self._tasks: dict[tuple[str, str], Any] = {}
        self._plans: dict[str, Any] = {}

    def __call__(self, completion: str, columns: dict[str, Any]) -> Sample:
        from graph.artifacts import Feedback, Plan

        key = (columns["problem_name"], columns["problem_source"])
        if key not in self._tasks:
            self._tasks[key] = task_from_source(key[0], key[1], columns.get("level") or None)
        plan_text = columns["plan"]
        if plan_text not in self._plans:
            self._plans[plan_text] = Plan.model_validate(json.loads(plan_text))
        feedback = columns.get("feedback") or ""
        return Sample(
            task=self._tasks[key],
            plan=self._plans[plan_text],
            skill=columns["skill"],
            completion=completion,
            previous=columns.get("previous_program") or None,
            feedback=Feedback.model_validate(json.loads(feedback)) if feedback else None,
            mode=columns.get("mode") or "write",
        )


def log_components(results: Sequence[Breakdown], log_metric: Callable[[str, float], None]) -> None:
    """The step's mean of every reward component (TRL averages them over a logging step)."""
    if not results:
        return
    count = float(len(results))
    for name in ("total", "rule", "rubric", "hacked", *DIMENSIONS):
        log_metric(f"stitchcuda/{name}", sum(r.component(name) for r in results) / count)
    log_metric("stitchcuda/no_program", sum(r.rule.stage == "no_program" for r in results) / count)


def make_reward_function(
    service: RewardService, objective: str, on_scored: Callable[[list[Breakdown]], None] | None = None
) -> Callable[..., Any]:
    """TRL's reward function: all completions of a step scored together, components logged."""
    factory = SampleFactory()
    columns = (
        "problem_name",
        "problem_source",
        "level",
        "skill",
        "mode",
        "plan",
        "previous_program",
        "feedback",
    )

    async def stitchcuda_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        samples = [
            factory(completion_text(c), {name: kwargs[name][i] for name in columns if name in kwargs})
            for i, c in enumerate(completions)
        ]
        results = await service.ascore_many(samples)
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_components(results, log_metric)
        if on_scored is not None:
            on_scored(results)
        return [r.component(objective) for r in results]

    return stitchcuda_reward


# ----------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------


def _metrics_callback(path: Path) -> Any:
    from transformers import TrainerCallback

    class MetricsFile(TrainerCallback):  # type: ignore[misc]
        """Appends every log of the trainer to OUTPUT/metrics.jsonl (a resumed run keeps appending)."""

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if not logs or not state.is_world_process_zero:
                return
            record = {"step": state.global_step, "time": round(time.time(), 3), **logs}
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, default=float) + "\n")

    return MetricsFile()


def grpo_arguments(config: TrainConfig, output_dir: str, max_steps: int | None) -> Any:
    import torch
    from trl import GRPOConfig

    defaults: dict[str, Any] = {
        "output_dir": output_dir,
        "per_device_train_batch_size": 2,
        "num_generations": 2,
        "max_completion_length": 256,
        "learning_rate": 1e-5,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": 10,
        "report_to": "none",
        "seed": config.seed,
        "bf16": False,
        "use_cpu": not torch.cuda.is_available(),
        "gradient_checkpointing": False,
    }
    values = defaults | config.grpo | {"output_dir": output_dir}
    if max_steps is not None:
        values["max_steps"] = max_steps
    try:
        return GRPOConfig(**values)
    except (TypeError, ValueError) as exc:
        raise TrainConfigError(f"grpo: {exc}") from None


def require_extra() -> None:
    """ImportError naming the missing training packages (the rl extra) before any work starts."""
    import importlib.util

    missing = []
    for name in TRAINING_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    if missing:
        raise ImportError(f"missing {', '.join(missing)}")


def lora_weights(model: Any) -> dict[str, Any]:
    """A copy of the LoRA parameters (to tell whether a run changed them)."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" in name}


def train(
    config_path: str | os.PathLike[str],
    *,
    max_steps: int | None = None,
    output_dir: str | None = None,
    on_trainer: Callable[[Any], None] | None = None,
    on_scored: Callable[[list[Breakdown]], None] | None = None,
) -> dict[str, Any]:
    """Run GRPO as the config says; returns a summary (steps, rewards, where things are)."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOTrainer

    from rl.models import load_model
    from rl.reward.judge import Judge

    config = load_config(config_path)
    if config.threads:
        import torch

        torch.set_num_threads(int(config.threads))
    out = Path(output_dir or config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = training_rows(config.data)
    model, tokenizer = load_model(config.model.name, config.model.gguf_file, config.model.dtype)
    rule = RuleSettings(
        mode=config.reward.rule,  # type: ignore[arg-type]
        timeout_s=config.reward.timeout_s,
        perf_trials=config.reward.perf_trials,
    )
    rule.resolved_mode()  # a bad mode fails here, before any step
    service = RewardService(
        RewardSettings(rule=rule, judge=Judge() if config.reward.judge else None),
        workers=config.reward.workers,
    )
    lora = LoraConfig(
        r=config.lora.r,
        lora_alpha=config.lora.alpha,
        lora_dropout=config.lora.dropout,
        target_modules=list(config.lora.target_modules),
        task_type="CAUSAL_LM",
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[make_reward_function(service, config.reward.objective, on_scored)],
        args=grpo_arguments(config, str(out), max_steps),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=[_metrics_callback(out / METRICS_FILE)],
    )
    if on_trainer is not None:
        on_trainer(trainer)
    checkpoint = get_last_checkpoint(str(out)) if config.resume else None
    started = time.monotonic()
    try:
        trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        service.close()
    trainer.save_model(str(out / "final"))
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    return {
        "steps": trainer.state.global_step,
        "resumed_from": checkpoint,
        "seconds": round(time.monotonic() - started, 1),
        "first_reward": rewards[0] if rewards else None,
        "last_reward": rewards[-1] if rewards else None,
        "objective": config.reward.objective,
        "output_dir": str(out),
        "metrics": str(out / METRICS_FILE),
        "adapter": str(out / "final"),
    }
