"""The LLM policy: planner, coder and verifier answered by OpenAI-compatible chat models.

Registered in `graph.policy` as 'llm' (a factory taking the Context). Clients are built inside each
call from the role's settings (`nodes/llm/settings.py`), never at import. What each method raises:

- `LLMSettingsError`: no model named, the key variable unset, a bad setting. Ends the run.
- `LLMCallError`: the endpoint failed after the client's retries (timeout, 429, 5xx, 401, 404,
  an unreadable reply). Ends the run, with the best candidate so far kept.
- `CoderOutputError` (from `write` and `revise` only): the model answered without a usable program.
  Its `.feedback()` is the `Feedback(kind="parse_error")` for the fix branch.

`plan` and `advise` do not raise on an unusable answer while there is something sound to return:
`plan` falls back to the offline planner's plan (raising `StructuredOutputError` only when there is
none), `advise` to advice built from the profile; both say so in the artifact.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from graph.artifacts import Candidate, CoderMode, Feedback, Plan, Profile, Task, TestResult
from graph.context import Context
from nodes.llm import offline_assist, prompting
from nodes.llm.call_log import CallRecorder
from nodes.llm.client import build_chat_model, call_model
from nodes.llm.errors import (
    CoderOutputError,
    LLMCallError,
    LLMPolicyError,
    LLMSettingsError,
    ModelOutputError,
    StructuredOutputError,
)
from nodes.llm.extract import extract_program
from nodes.llm.plan_merge import reconcile_plan
from nodes.llm.run_config import call_config
from nodes.llm.settings import RoleSettings, resolve_role_settings
from nodes.llm.structured import invoke_structured

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig

__all__ = [
    "CoderOutputError",
    "LLMCallError",
    "LLMPolicy",
    "LLMPolicyError",
    "LLMSettingsError",
    "ModelOutputError",
    "StructuredOutputError",
]


class LLMPolicy:
    """Plans, writes, revises and advises with chat models; see the module docstring for errors."""

    name = "llm"

    def __init__(
        self,
        context: Context,
        *,
        offline_factory: offline_assist.OfflineFactory | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.context = context
        self._offline_factory = offline_factory
        self._environ = environ
        self._offline: tuple[Any, str] | None = None
        self.last_exchange: dict[str, Any] | None = None  # the coder's last messages and raw answer

    # -- plumbing ------------------------------------------------------------------------------

    def settings(self, role: str) -> RoleSettings:
        """The resolved settings of `role` (planner, coder, verifier, judge)."""
        return resolve_role_settings(self.context, role, self._environ)

    def _client(self, role: str) -> tuple[RoleSettings, BaseChatModel]:
        settings = self.settings(role)
        return settings, build_chat_model(settings, self._environ)

    def _recorder(
        self, settings: RoleSettings, mode: str | None = None, candidate: int | None = None
    ) -> CallRecorder:
        return CallRecorder(settings, self.context.out_dir, mode=mode, candidate=candidate)

    def _offline_policy(self) -> tuple[Any, str]:
        if self._offline is None:
            self._offline = offline_assist.make_offline_policy(self.context, self._offline_factory)
        return self._offline

    # -- planner -------------------------------------------------------------------------------

    def plan(self, task: Task, reference_profile: Profile | None) -> Plan:
        settings, model = self._client("planner")
        offline, _ = self._offline_policy()
        ops, ops_note = offline_assist.reference_ops(task, reference_profile, offline)
        messages = prompting.planner_messages(self.context, task, ops, reference_profile)
        config = call_config(settings, task, iteration=0)
        try:
            answer = invoke_structured(
                model, settings, Plan, messages, config, recorder=self._recorder(settings)
            )
        except StructuredOutputError as exc:
            fallback = offline_assist.offline_plan(task, offline)
            if fallback is None:
                raise
            note = f"the planner model's answer was unusable ({exc}); this is the offline planner's plan"
            return fallback.model_copy(update={"notes": " ".join(filter(None, [fallback.notes, note]))})
        via = f"planned by {settings.model} via {answer.method}"
        if answer.notes:
            via += f" (after {'; '.join(answer.notes)})"
        return reconcile_plan(answer.value, task, ops, f"{via}; {ops_note}.")

    # -- coder ---------------------------------------------------------------------------------

    def write(self, task: Task, plan: Plan, candidate_id: int, feedback: Feedback | None = None) -> Candidate:
        """Skill 1; with hybrid start, the offline program is offered as the starting point.

        `feedback`: why the previous write answer could not be used (a retry), shown to the model.
        """
        settings, model = self._client("coder")
        offline_source, hybrid = None, "off"
        if self.context.hybrid_start:
            offline, reason = self._offline_policy()
            program, hybrid = offline_assist.offline_program(task, offline, candidate_id)
            if program is None and offline is None:
                hybrid = reason
            offline_source = program.source if program is not None else None
        messages = prompting.coder_write_messages(self.context, task, plan, offline_source, feedback)
        config = call_config(settings, task, iteration=candidate_id, mode="write", candidate=candidate_id)
        return self._code(settings, model, messages, config, task, plan, candidate_id, "write", None, hybrid)

    def revise(
        self,
        task: Task,
        plan: Plan,
        previous: Candidate,
        feedback: Feedback,
        mode: CoderMode,
        candidate_id: int,
    ) -> Candidate:
        """Skill 2: the previous program and the verifier's feedback in, a revised program out."""
        settings, model = self._client("coder")
        messages = prompting.coder_revise_messages(self.context, task, plan, previous, feedback, mode)
        config = call_config(settings, task, iteration=candidate_id, mode=mode, candidate=candidate_id)
        return self._code(
            settings, model, messages, config, task, plan, candidate_id, mode, previous.id, None
        )

    def _code(
        self,
        settings: RoleSettings,
        model: BaseChatModel,
        messages: Sequence[tuple[str, str]],
        config: RunnableConfig,
        task: Task,
        plan: Plan,
        candidate_id: int,
        mode: CoderMode,
        parent: int | None,
        hybrid: str | None,
    ) -> Candidate:
        recorder = self._recorder(settings, mode, candidate_id)
        started = time.monotonic()
        try:
            message = call_model(settings, lambda: model.invoke(list(messages), config=config))
        except LLMCallError as exc:
            recorder.record(started, "failed", str(exc))
            raise
        content = message.content if isinstance(message.content, str) else str(message.content)
        self.last_exchange = {"messages": list(messages), "answer": content}  # read by nodes.support.turn_log
        finish_reason = (message.response_metadata or {}).get("finish_reason")
        try:
            program = extract_program(content, finish_reason)
        except CoderOutputError as exc:
            recorder.record(started, "rejected", str(exc), message=message)
            raise
        recorder.record(
            started, "repaired" if program.repairs else "parsed", "; ".join(program.repairs), message=message
        )
        meta: dict[str, Any] = {"model": settings.model, "finish_reason": finish_reason, "form": program.form}
        usage = getattr(message, "usage_metadata", None)
        if usage:
            meta["tokens"] = {"input": usage.get("input_tokens", 0), "output": usage.get("output_tokens", 0)}
        if hybrid is not None:
            meta["hybrid_start"] = hybrid
        return Candidate(
            id=candidate_id,
            source=program.source,
            mode=mode,
            parent=parent,
            policy=self.name,
            summary=program.summary,
            covered_ops=list(plan.covered_ops),
            uncovered_ops=list(plan.uncovered_ops),
            meta=meta,
        )

    # -- verifier ------------------------------------------------------------------------------

    def advise(
        self,
        task: Task,
        plan: Plan,
        candidate: Candidate,
        test: TestResult,
        profile: Profile,
        *,
        diagnosis: str = "",
        notes: Sequence[str] = (),
    ) -> Feedback:
        """Optimisation advice for a passing candidate; `diagnosis` and `notes` come from the
        verifier node (roofline, retrieved guidance) when it has them."""
        settings, model = self._client("verifier")
        diagnosis = diagnosis or prompting.throughput_diagnosis(plan, test)
        messages = prompting.verifier_messages(
            self.context, task, plan, candidate, test, profile, diagnosis, notes
        )
        config = call_config(settings, task, iteration=candidate.id, candidate=candidate.id)
        try:
            recorder = self._recorder(settings, candidate=candidate.id)
            answer = invoke_structured(model, settings, Feedback, messages, config, recorder=recorder)
        except StructuredOutputError as exc:
            return _advice_from_profile(profile, f"the verifier model's answer was unusable: {exc}")
        return answer.value.model_copy(update={"kind": "optimize"})


def _advice_from_profile(profile: Profile, why: str) -> Feedback:
    """Plain advice when the model's is unusable: look at the kernel that takes the most time."""
    top = max(profile.top, key=lambda k: k.share, default=None)
    if top is None:
        summary = (
            f"reduce the {profile.kernel_count} kernel launches of one forward ({profile.device_ms:.4g} ms)"
        )
    else:
        summary = f"speed up {top.name}, {top.share:.0%} of the device time ({top.total_ms:.4g} ms)"
    return Feedback(
        kind="optimize",
        summary=summary,
        evidence=f"{prompting.render_profile(profile)}\n({why})",
        suggestions=[
            "Fuse the elementwise work around the top kernel into it to save a pass over memory.",
            "Vectorise loads and stores (float4) and check the launch covers every SM.",
            "If kernels are short and many, capture the forward in a CUDA graph.",
        ],
    )
