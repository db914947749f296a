"""The chat client of one role, built on demand, and the translation of its failures.

`ChatOpenAI` covers OpenAI and any OpenAI-compatible server (vLLM, SGLang) through `base_url`; it is
imported and built only inside a policy call, so importing the graph needs neither the package's
import time nor an API key. Transport failures surface after the openai client's own retries (it
retries timeouts, 408/409/429 and 5xx with back-off, honouring Retry-After) as one-line
`LLMCallError`s naming role, model, endpoint and what happened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from nodes.llm.errors import LLMCallError, one_line
from nodes.llm.settings import RoleSettings

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

T = TypeVar("T")


def build_chat_model(settings: RoleSettings, environ: Mapping[str, str] | None = None) -> BaseChatModel:
    """A ChatOpenAI for `settings`; raises `LLMSettingsError` when the key variable is unset."""
    api_key = settings.api_key(environ)
    from langchain_openai import ChatOpenAI  # lazy: heavy, and needs a key only when used
    from pydantic import SecretStr

    return ChatOpenAI(
        model=settings.model,
        base_url=settings.base_url,
        api_key=SecretStr(api_key),
        temperature=settings.temperature,
        max_completion_tokens=settings.max_tokens,  # sent as max_completion_tokens (max_tokens is deprecated)
        timeout=settings.timeout_s,
        max_retries=settings.max_retries,
    )


def call_model(settings: RoleSettings, call: Callable[[], T], *, pass_rejections: bool = False) -> T:
    """Run `call` (one model invocation) and turn transport failures into `LLMCallError`.

    With `pass_rejections`, a 400/422 rejection of the request is re-raised unchanged: the
    structured-output fallback reads it as "this server does not support that method". A prompt
    longer than the model's context is never passed on: no other method would fit it either.
    """
    import openai
    from langchain_core.exceptions import ContextOverflowError

    try:
        return call()
    except ContextOverflowError as exc:
        raise LLMCallError(
            f"{settings.describe()}: the prompt exceeds the model's context: {_detail(exc)}"
        ) from exc
    except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
        if pass_rejections:
            raise
        raise LLMCallError(
            f"{settings.describe()}: request rejected ({exc.status_code}): {_detail(exc)}"
        ) from exc
    except openai.APITimeoutError as exc:
        raise LLMCallError(
            f"{settings.describe()}: no answer within {settings.timeout_s:g} s "
            f"({_attempts(settings)}); raise the timeout (STITCHCUDA_{settings.role.upper()}_TIMEOUT_S) "
            "or check the server"
        ) from exc
    except openai.APIConnectionError as exc:
        raise LLMCallError(f"{settings.describe()}: cannot connect ({_attempts(settings)}): {exc}") from exc
    except openai.AuthenticationError as exc:
        raise LLMCallError(
            f"{settings.describe()}: the server rejected the key in {settings.api_key_env} (401): {_detail(exc)}"
        ) from exc
    except openai.NotFoundError as exc:
        raise LLMCallError(
            f"{settings.describe()}: not found (404), is the model name served there? {_detail(exc)}"
        ) from exc
    except openai.RateLimitError as exc:
        raise LLMCallError(
            f"{settings.describe()}: rate-limited (429) ({_attempts(settings)}): {_detail(exc)}"
        ) from exc
    except openai.APIStatusError as exc:
        raise LLMCallError(
            f"{settings.describe()}: server error {exc.status_code} ({_attempts(settings)}): {_detail(exc)}"
        ) from exc
    except openai.LengthFinishReasonError:
        raise  # an answer cut at max_tokens: the caller's output error, not a transport one
    except openai.OpenAIError as exc:
        raise LLMCallError(f"{settings.describe()}: {type(exc).__name__}: {exc}") from exc
    except ValueError as exc:
        # langchain-openai raises ValueError for an HTTP 200 whose body is not a completion.
        raise LLMCallError(f"{settings.describe()}: unreadable reply: {one_line(str(exc), 200)}") from exc


def _attempts(settings: RoleSettings) -> str:
    return f"{settings.max_retries + 1} attempt{'s' if settings.max_retries else ''}"


def _detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and error.get("message"):
            return one_line(str(error["message"]), 200)
    return one_line(getattr(exc, "message", "") or str(exc), 200)
