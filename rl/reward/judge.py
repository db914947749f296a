"""The rubric from a judge model: the reserved `judge` role, any OpenAI-compatible endpoint.

The judge sees the skill's inputs, the answer, our static findings and the verifier's result, and
returns one JSON object: a 1-5 score with a reason per dimension and a `major_hacking` flag. It goes
through the same client and structured-output fallbacks as the graph's roles (`nodes.llm`), so the
settings are the judge role's (`STITCHCUDA_JUDGE_MODEL`, `..._BASE_URL`, `..._API_KEY_ENV`, ...).
A judge that cannot answer (settings missing, endpoint down, no valid JSON) raises `JudgeError`; the
core then scores with the deterministic rubric and says so in the evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from graph.context import Context
from nodes.llm.errors import LLMPolicyError
from rl.reward.answer import Answer
from rl.reward.rubric import aggregate
from rl.reward.sample import Dimension, Rubric, RulePart, Sample

MAX_ANSWER_CHARS = 16_000


class JudgeError(RuntimeError):
    """The judge gave no usable verdict; the message says why."""


class DimensionScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    score: int = Field(ge=1, le=5, description="1 (worst) to 5 (best)")
    reason: str = Field(description="one sentence")


class JudgeVerdict(BaseModel):
    """The judge's structured answer."""

    model_config = ConfigDict(extra="forbid")

    anti_hacking: DimensionScore
    cuda_engineering: DimensionScore
    operator_coverage: DimensionScore
    skill_compliance: DimensionScore
    major_hacking: bool = Field(description="true only for a clear cheat")
    hacking_reason: str = Field("", description="which cheat, when major_hacking is true")


def judge_messages(
    context: Context, sample: Sample, answer: Answer, findings: Sequence[dict[str, str]], rule: RulePart
) -> list[tuple[str, str]]:
    from nodes.llm import prompting

    revise = ""
    if sample.skill == "revise":
        feedback = prompting.render_feedback(sample.feedback) if sample.feedback else "(none)"
        previous = prompting.fence(
            prompting.clip(sample.previous or "", prompting.MAX_SOURCE_CHARS), "python"
        )
        revise = f"\n## Previous program\n{previous}\n\n## Verifier feedback on it\n{feedback}\n"
    listed = "\n".join(f"- {f['id']} ({f['severity']}): {f['evidence']}" for f in findings) or "(none)"
    return [
        (
            "system",
            prompting.fill(
                "judge_system.md", gpu_name=prompting.gpu_name(context.gpu_arch), gpu_arch=context.gpu_arch
            ),
        ),
        (
            "human",
            prompting.fill(
                "judge_user.md",
                skill=sample.skill,
                mode=sample.mode,
                task_name=sample.task.name,
                reference_source=prompting.fence(sample.task.source, "python"),
                plan=prompting.render_plan(sample.plan),
                revise_context=revise,
                answer=prompting.fence(prompting.clip(answer.text, MAX_ANSWER_CHARS), "markdown"),
                findings=listed,
                rule=f"{rule.stage} ({rule.path}): {rule.note}",
            ),
        ),
    ]


def _dimension(score: DimensionScore) -> Dimension:
    return Dimension((score.score - 1) / 4.0, score.reason)


class Judge:
    """Scores answers with the judge role's model; one structured call per answer."""

    def __init__(self, context: Context | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.context = context or Context()
        self.environ = environ

    def rubric(
        self, sample: Sample, answer: Answer, findings: Sequence[dict[str, str]], rule: RulePart
    ) -> tuple[Rubric, str]:
        """(the judge's rubric, its major-hacking reason or ''), or JudgeError."""
        from nodes.llm.client import build_chat_model
        from nodes.llm.run_config import call_config
        from nodes.llm.settings import resolve_role_settings
        from nodes.llm.structured import invoke_structured

        try:
            settings = resolve_role_settings(self.context, "judge", self.environ)
            model = build_chat_model(settings, self.environ)
            config: Any = call_config(settings, sample.task, iteration=0, mode=sample.mode, policy="rl")
            messages = judge_messages(self.context, sample, answer, findings, rule)
            verdict = invoke_structured(model, settings, JudgeVerdict, messages, config).value
        except LLMPolicyError as exc:
            raise JudgeError(str(exc)) from exc
        dims = [
            _dimension(verdict.anti_hacking),
            _dimension(verdict.cuda_engineering),
            _dimension(verdict.operator_coverage),
            _dimension(verdict.skill_compliance),
        ]
        flag = (verdict.hacking_reason or "major hacking") if verdict.major_hacking else ""
        if flag:
            dims[0] = Dimension(0.0, f"{dims[0].reason} (major hacking: {flag})")
        rubric = Rubric(
            anti_hacking=dims[0],
            cuda_engineering=dims[1],
            operator_coverage=dims[2],
            skill_compliance=dims[3],
            aggregate=aggregate(dims),
            source=f"judge:{settings.model}",
        )
        return rubric, flag
