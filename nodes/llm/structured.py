"""Structured output that survives the servers and models we meet.

Order of attempts, one model call each (a role's `structured_output` setting may narrow or reorder
them, e.g. to `text` alone for a server known to honour neither of the first two):
1. `with_structured_output(..., method="json_schema")`: OpenAI, vLLM and SGLang constrain decoding
   to the schema.
2. `method="function_calling"`: for servers that reject `response_format` (HTTP 400/422).
3. Plain text with the schema and a skeleton of a valid answer in the prompt, parsed tolerantly
   (fences, `<think>`, prose around the JSON).
An answer that arrives but does not validate is itself parsed tolerantly before moving on. Some
servers (`transformers serve`) accept `response_format` and `tool_choice` but ignore them; an
answer to json_schema that is not a JSON object at all, or one to function_calling without a tool
call, shows that, and the method is then skipped like one the server rejected. Both are
remembered per endpoint and model for the rest of the process. The answer is always validated
against the pydantic schema here, from the raw message: langchain's JSON parser accepts partial
JSON, which would let a truncated answer through. Every request is recorded (`call_log`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pydantic import BaseModel, ValidationError

from nodes.llm.call_log import CallRecorder
from nodes.llm.client import call_model
from nodes.llm.errors import LLMCallError, StructuredOutputError, one_line
from nodes.llm.extract import fenced_blocks, strip_thinking
from nodes.llm.settings import STRUCTURED_METHODS, RoleSettings

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig

M = TypeVar("M", bound=BaseModel)
Messages = Sequence[tuple[str, str]]

METHODS: tuple[str, ...] = STRUCTURED_METHODS

_skipped: dict[tuple[str, str], dict[str, str]] = {}  # endpoint -> method -> why it is skipped
_skipped_lock = threading.Lock()


@dataclass
class StructuredAnswer(Generic[M]):
    """A validated artifact and how it was obtained."""

    value: M
    method: str
    raw: Any = None  # the AIMessage it came from
    notes: list[str] = field(default_factory=list)  # what failed before it
    repairs: list[str] = field(default_factory=list)  # what had to be done to the answer to read it


def _endpoint(settings: RoleSettings) -> tuple[str, str]:
    return (settings.base_url or "openai", settings.model)


def rejected_methods(settings: RoleSettings) -> set[str]:
    """Methods this endpoint and model refused or ignored earlier in the process."""
    with _skipped_lock:
        return set(_skipped.get(_endpoint(settings), {}))


def _remember_skip(settings: RoleSettings, method: str, why: str) -> None:
    with _skipped_lock:
        _skipped.setdefault(_endpoint(settings), {})[method] = why


def _skip_reason(settings: RoleSettings, method: str) -> str:
    with _skipped_lock:
        return _skipped.get(_endpoint(settings), {}).get(method, "")


def _first_json_object(text: str) -> tuple[Any, list[str]]:
    """The first JSON object in `text` and the repairs needed to reach it (none: the answer is JSON)."""
    visible, _ = strip_thinking(text)
    repairs = ["dropped a <think> section"] if visible != text else []
    stripped = visible.strip()
    try:
        whole = json.loads(stripped)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        return whole, repairs
    decoder = json.JSONDecoder()
    candidates = [
        (f"a ```{block.lang or 'fenced'} block", block.code)
        for block in fenced_blocks(visible)
        if block.closed and block.lang in ("json", "", "javascript")
    ]
    candidates.append(("the prose", visible))
    for where, candidate in candidates:
        for match in re.finditer(r"\{", candidate):
            try:
                value, _ = decoder.raw_decode(candidate, match.start())
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value, [*repairs, f"took the JSON object out of {where}"]
    raise ValueError("no JSON object in the answer")


def _validate(schema: type[M], value: Any, repairs: list[str] | None = None) -> M:
    """Validate `value`, accepting one level of wrapping ({"Plan": {...}}, {"arguments": {...}})."""
    try:
        return schema.model_validate(value)
    except ValidationError as first:
        if isinstance(value, dict) and len(value) == 1:
            ((key, inner),) = value.items()
            unwrapped: Any = None
            if isinstance(inner, dict):
                unwrapped = inner
            elif isinstance(inner, str):
                try:
                    unwrapped = json.loads(inner)
                except ValueError:
                    unwrapped = None
            if unwrapped is not None:
                try:
                    result = schema.model_validate(unwrapped)
                except ValidationError:
                    pass
                else:
                    if repairs is not None:
                        repairs.append(f"unwrapped the object from key {key!r}")
                    return result
        raise first


def _problems(schema: type[BaseModel], exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()[:4]
    )


def parse_with_repairs(schema: type[M], text: str) -> tuple[M, list[str]]:
    """A `schema` object found in free text, and the repairs it took; ValueError (one line) if none."""
    value, repairs = _first_json_object(text)
    try:
        return _validate(schema, value, repairs), repairs
    except ValidationError as exc:
        raise ValueError(f"the JSON does not match {schema.__name__}: {_problems(schema, exc)}") from None


def parse_tolerantly(schema: type[M], text: str) -> M:
    """Find and validate a `schema` object in free text; ValueError (one line) when there is none."""
    return parse_with_repairs(schema, text)[0]


def _message_text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


class _Ignored(ValueError):
    """The server accepted the method's request but answered as if it had not been asked for it."""


def _read_answer(schema: type[M], message: Any, method: str) -> tuple[M, list[str]]:
    """Validate the raw AIMessage of one method; ValueError saying what is wrong."""
    finish = (getattr(message, "response_metadata", None) or {}).get("finish_reason")
    text = _message_text(message)
    if method == "function_calling":
        calls = getattr(message, "tool_calls", None) or []
        for call in calls:
            repairs: list[str] = []
            try:
                return _validate(schema, call.get("args", {}), repairs), repairs
            except ValidationError as exc:
                raise ValueError(
                    f"the tool call's arguments do not match {schema.__name__}: {_problems(schema, exc)}"
                ) from None
        for bad in getattr(message, "invalid_tool_calls", None) or []:
            raise ValueError(
                f"the tool call's arguments are not valid JSON: {one_line(str(bad.get('args')), 120)}"
            )
        try:
            value, repairs = parse_with_repairs(schema, text)
        except ValueError as exc:
            raise _Ignored(f"the answer has no tool call although one was required ({exc})") from None
        return value, ["read the arguments from text instead of a tool call", *repairs]
    if finish == "length":
        raise ValueError("the answer hit the token limit before the JSON was complete")
    try:
        return parse_with_repairs(schema, text)
    except ValueError as exc:
        visible, _ = strip_thinking(text)
        if method == "json_schema" and not visible.lstrip().startswith("{"):
            raise _Ignored(f"the answer is not a JSON object although one was required ({exc})") from None
        raise


def json_schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    """The schema as sent to the server: pydantic's JSON schema, titled so it names the tool/format."""
    document = schema.model_json_schema()
    document.setdefault("title", schema.__name__)
    return document


def skeleton(schema: dict[str, Any], node: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A placeholder instance of a JSON schema (every property, one item per list): small models
    copy the shape of an example far more reliably than they read a schema."""
    node = schema if node is None else node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return skeleton(schema, schema.get("$defs", {}).get(name, {}), depth + 1)
    if "enum" in node:
        return node["enum"][0]
    for union in ("anyOf", "oneOf"):
        if union in node:
            options = [o for o in node[union] if o.get("type") != "null"] or node[union]
            return skeleton(schema, options[0], depth + 1)
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        return {k: skeleton(schema, v, depth + 1) for k, v in node.get("properties", {}).items()}
    if kind == "array":
        return [] if depth > 4 else [skeleton(schema, node.get("items", {}), depth + 1)]
    return {"string": "...", "integer": 0, "number": 0.0, "boolean": False}.get(str(kind))


def _schema_instruction(schema: type[BaseModel]) -> str:
    document = json_schema_of(schema)
    return (
        f"Answer with one JSON object that validates against this JSON schema ({schema.__name__}); "
        "no prose, no code fences:\n"
        + json.dumps(document, separators=(",", ":"))
        + "\nIts shape, with placeholders to replace:\n"
        + json.dumps(skeleton(document), separators=(",", ":"))
    )


def _ask(
    model: BaseChatModel,
    settings: RoleSettings,
    schema: type[M],
    messages: Messages,
    method: str,
    config: RunnableConfig,
) -> BaseMessage:
    """One model call for `method`; 400/422 rejections pass through for the caller to remember."""
    if method == "text":
        plain = [*messages, ("human", _schema_instruction(schema))]
        return call_model(settings, lambda: model.invoke(plain, config=config))
    bound = model.with_structured_output(json_schema_of(schema), method=method, include_raw=True)
    result = call_model(settings, lambda: bound.invoke(list(messages), config=config), pass_rejections=True)
    return cast("dict[str, Any]", result)["raw"]  # include_raw=True: {"raw", "parsed", "parsing_error"}


def invoke_structured(
    model: BaseChatModel,
    settings: RoleSettings,
    schema: type[M],
    messages: Messages,
    config: RunnableConfig,
    methods: Sequence[str] | None = None,
    recorder: CallRecorder | None = None,
) -> StructuredAnswer[M]:
    """Ask `model` for a `schema` instance, trying each method in turn (see the module docstring).

    `methods` defaults to the role's `structured_output` setting. Raises `LLMCallError` on transport
    failures and `StructuredOutputError` (role, notes per method, the last raw answer) when no
    method produced a valid artifact. Each request is recorded by `recorder`.
    """
    import openai

    recorder = recorder or CallRecorder(settings)
    notes: list[str] = []
    last_raw = ""
    for method in settings.structured_output if methods is None else methods:
        skipped = _skip_reason(settings, method)
        if skipped:
            notes.append(f"{method}: skipped, {skipped}")
            continue
        run_config: Any = {**config, "run_name": f"{config.get('run_name', settings.role)}[{method}]"}
        started = time.monotonic()
        try:
            message = _ask(model, settings, schema, messages, method, run_config)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            _remember_skip(settings, method, f"the server rejected it earlier ({exc.status_code})")
            why = f"rejected by the server ({exc.status_code}): {one_line(exc.message, 160)}"
            recorder.record(started, "rejected", why, method=method)
            notes.append(f"{method}: {why}")
            continue
        except openai.LengthFinishReasonError:
            why = "the answer hit the token limit before the JSON was complete"
            recorder.record(started, "rejected", why, method=method, finish_reason="length")
            notes.append(f"{method}: {why}")
            continue
        except LLMCallError as exc:
            recorder.record(started, "failed", str(exc), method=method)
            raise
        last_raw = _message_text(message)
        try:
            value, repairs = _read_answer(schema, message, method)
        except _Ignored as exc:
            _remember_skip(settings, method, "the server ignored it earlier")
            recorder.record(
                started, "rejected", f"the server ignored {method}: {exc}", message=message, method=method
            )
            notes.append(f"{method}: ignored by the server: {one_line(str(exc), 200)}")
            continue
        except ValueError as exc:
            recorder.record(started, "rejected", str(exc), message=message, method=method)
            notes.append(f"{method}: {one_line(str(exc), 240)}")
            continue
        recorder.record(
            started, "repaired" if repairs else "parsed", "; ".join(repairs), message=message, method=method
        )
        return StructuredAnswer(value=value, method=method, raw=message, notes=notes, repairs=repairs)
    raise StructuredOutputError(
        f"no valid {schema.__name__} from the {settings.role} model: " + " | ".join(notes),
        role=settings.role,
        raw=last_raw,
    )
