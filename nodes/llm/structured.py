"""Structured output that survives the servers and models we meet.

Order of attempts, one model call each:
1. `with_structured_output(..., method="json_schema")`: OpenAI, vLLM and SGLang constrain decoding
   to the schema.
2. `method="function_calling"`: for servers that reject `response_format` (HTTP 400/422).
3. Plain text with the schema in the prompt, parsed tolerantly (fences, `<think>`, prose around the
   JSON).
An answer that arrives but does not validate is itself parsed tolerantly before moving on. A server
that rejected a method is remembered (per endpoint and model) so later calls skip it. The answer is
always validated against the pydantic schema here, from the raw message: langchain's JSON parser
accepts partial JSON, which would let a truncated answer through.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from nodes.llm.client import call_model
from nodes.llm.errors import StructuredOutputError, one_line
from nodes.llm.extract import fenced_blocks, strip_thinking
from nodes.llm.settings import RoleSettings

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig

M = TypeVar("M", bound=BaseModel)
Messages = Sequence[tuple[str, str]]

METHODS: tuple[str, ...] = ("json_schema", "function_calling", "text")

_rejected: dict[tuple[str, str], set[str]] = {}
_rejected_lock = threading.Lock()


@dataclass
class StructuredAnswer(Generic[M]):
    """A validated artifact and how it was obtained."""

    value: M
    method: str
    raw: Any = None  # the AIMessage it came from
    notes: list[str] = field(default_factory=list)  # what failed before it


def _endpoint(settings: RoleSettings) -> tuple[str, str]:
    return (settings.base_url or "openai", settings.model)


def rejected_methods(settings: RoleSettings) -> set[str]:
    """Methods this endpoint and model refused earlier in the process."""
    with _rejected_lock:
        return set(_rejected.get(_endpoint(settings), set()))


def _remember_rejection(settings: RoleSettings, method: str) -> None:
    with _rejected_lock:
        _rejected.setdefault(_endpoint(settings), set()).add(method)


def _first_json_object(text: str) -> Any:
    """The first JSON object in `text`, trying fenced json blocks first, then every '{'."""
    visible, _ = strip_thinking(text)
    candidates = [b.code for b in fenced_blocks(visible) if b.closed and b.lang in ("json", "", "javascript")]
    candidates.append(visible)
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for match in re.finditer(r"\{", candidate):
            try:
                value, _ = decoder.raw_decode(candidate, match.start())
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    raise ValueError("no JSON object in the answer")


def _validate(schema: type[M], value: Any) -> M:
    """Validate `value`, accepting one level of wrapping ({"Plan": {...}}, {"arguments": {...}})."""
    try:
        return schema.model_validate(value)
    except ValidationError as first:
        if isinstance(value, dict) and len(value) == 1:
            (inner,) = value.values()
            if isinstance(inner, dict):
                try:
                    return schema.model_validate(inner)
                except ValidationError:
                    pass
            if isinstance(inner, str):
                try:
                    return schema.model_validate(json.loads(inner))
                except (ValidationError, ValueError):
                    pass
        raise first


def parse_tolerantly(schema: type[M], text: str) -> M:
    """Find and validate a `schema` object in free text; ValueError (one line) when there is none."""
    value = _first_json_object(text)
    try:
        return _validate(schema, value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()[:4]
        )
        raise ValueError(f"the JSON does not match {schema.__name__}: {problems}") from None


def _message_text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _read_answer(schema: type[M], message: Any, method: str) -> M:
    """Validate the raw AIMessage of one method; ValueError saying what is wrong."""
    finish = (getattr(message, "response_metadata", None) or {}).get("finish_reason")
    if finish == "length":
        raise ValueError("the answer hit the token limit before the JSON was complete")
    if method == "function_calling":
        for call in getattr(message, "tool_calls", None) or []:
            try:
                return _validate(schema, call.get("args", {}))
            except ValidationError as exc:
                raise ValueError(
                    f"the tool call's arguments do not match {schema.__name__}: {one_line(str(exc), 200)}"
                ) from None
        for bad in getattr(message, "invalid_tool_calls", None) or []:
            raise ValueError(
                f"the tool call's arguments are not valid JSON: {one_line(str(bad.get('args')), 120)}"
            )
    return parse_tolerantly(schema, _message_text(message))


def json_schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    """The schema as sent to the server: pydantic's JSON schema, titled so it names the tool/format."""
    document = schema.model_json_schema()
    document.setdefault("title", schema.__name__)
    return document


def _schema_instruction(schema: type[BaseModel]) -> str:
    return (
        f"Answer with one JSON object that validates against this JSON schema ({schema.__name__}); "
        "no prose, no code fences:\n" + json.dumps(json_schema_of(schema), indent=1)
    )


def invoke_structured(
    model: BaseChatModel,
    settings: RoleSettings,
    schema: type[M],
    messages: Messages,
    config: RunnableConfig,
    methods: Sequence[str] = METHODS,
) -> StructuredAnswer[M]:
    """Ask `model` for a `schema` instance, trying each method in turn (see the module docstring).

    Raises `LLMCallError` on transport failures and `StructuredOutputError` (role, notes per method,
    the last raw answer) when no method produced a valid artifact.
    """
    import openai

    notes: list[str] = []
    last_raw = ""
    skip = rejected_methods(settings)
    for method in methods:
        if method in skip:
            notes.append(f"{method}: skipped, the server rejected it earlier")
            continue
        run_config = {**config, "run_name": f"{config.get('run_name', settings.role)}[{method}]"}
        try:
            if method == "text":
                plain = [*messages, ("human", _schema_instruction(schema))]
                message: BaseMessage = call_model(
                    settings, lambda m=plain, c=run_config: model.invoke(m, config=c)
                )
            else:
                bound = model.with_structured_output(json_schema_of(schema), method=method, include_raw=True)
                result = call_model(
                    settings,
                    lambda b=bound, c=run_config: b.invoke(list(messages), config=c),
                    pass_rejections=True,
                )
                message = result["raw"]
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            _remember_rejection(settings, method)
            notes.append(
                f"{method}: rejected by the server ({exc.status_code}): {one_line(exc.message, 160)}"
            )
            continue
        except openai.LengthFinishReasonError:
            notes.append(f"{method}: the answer hit the token limit before the JSON was complete")
            continue
        last_raw = _message_text(message)
        try:
            value = _read_answer(schema, message, method)
        except ValueError as exc:
            notes.append(f"{method}: {one_line(str(exc), 240)}")
            continue
        return StructuredAnswer(value=value, method=method, raw=message, notes=notes)
    raise StructuredOutputError(
        f"no valid {schema.__name__} from the {settings.role} model: " + " | ".join(notes),
        role=settings.role,
        raw=last_raw,
    )
