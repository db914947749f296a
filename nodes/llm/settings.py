"""Model settings per role, resolved from the run's Context and the environment.

Every role (planner, coder, verifier, judge) may use its own model and endpoint, so a run can plan
with a hosted model and write code with a local vLLM or SGLang server. For each setting the most
specific source that names it wins, and at equal specificity the Context wins over the environment:

1. `Context.llm_roles[role][setting]`
2. `Context.<role>_model` (model only)
3. `STITCHCUDA_<ROLE>_<SETTING>`           e.g. STITCHCUDA_CODER_BASE_URL
4. `Context.llm_<setting>`
5. `STITCHCUDA_LLM_<SETTING>`               e.g. STITCHCUDA_LLM_MODEL
6. `OPENAI_BASE_URL` (base_url); for the key variable: `STITCHCUDA_<ROLE>_API_KEY` when it is set,
   else `OPENAI_API_KEY`
7. the built-in default (timeout 600 s, 2 retries; temperature and max tokens left to the server;
   structured output tried as json_schema, then function_calling, then text)

The key itself is read only when a client is built, from the variable the settings name, so it never
lands in the Context, a checkpoint or a trace. Resolution is pure: it reads `environ`, nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from graph.context import Context
from nodes.llm.errors import LLMSettingsError

Role = Literal["planner", "coder", "verifier", "judge"]
ROLES: tuple[str, ...] = get_args(Role)

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_KEY_VARIABLE = "OPENAI_API_KEY"
STRUCTURED_METHODS: tuple[str, ...] = ("json_schema", "function_calling", "text")


@dataclass(frozen=True)
class RoleSettings:
    """Everything needed to build one role's chat client (but not the key itself)."""

    role: str
    model: str
    base_url: str | None
    api_key_env: str
    temperature: float | None
    max_tokens: int | None
    timeout_s: float
    max_retries: int
    structured_output: tuple[str, ...] = STRUCTURED_METHODS  # methods to try, in order

    def describe(self) -> str:
        """How errors name this client: role, model and endpoint."""
        return f"{self.role} model {self.model!r} at {self.base_url or 'the OpenAI API'}"

    def api_key(self, environ: Mapping[str, str] | None = None) -> str:
        """The key from the named variable; a clear error when it is missing."""
        env = os.environ if environ is None else environ
        key = env.get(self.api_key_env, "")
        if not key.strip():
            raise LLMSettingsError(
                f"{self.describe()}: no API key: environment variable {self.api_key_env} is not set "
                f"(set it, or name another variable with STITCHCUDA_{self.role.upper()}_API_KEY_ENV; "
                "a local vLLM or SGLang server accepts the value EMPTY)"
            )
        return key


def _text(value: Any) -> str:
    return str(value).strip()


def _number(value: Any) -> float:
    return float(value)


def _methods(value: Any) -> tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(name).strip() for name in names if str(name).strip())


def _known_methods(methods: tuple[str, ...]) -> bool:
    return bool(methods) and len(set(methods)) == len(methods) and set(methods) <= set(STRUCTURED_METHODS)


def _count(value: Any) -> int:
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("not a whole number")
    return int(value)


# setting -> (environment suffix, parser, check on the parsed value, what the check requires)
_SPECS: dict[str, tuple[str, Callable[[Any], Any], Callable[[Any], bool], str]] = {
    "model": ("MODEL", _text, bool, "a non-empty name"),
    "base_url": ("BASE_URL", _text, lambda v: v.startswith(("http://", "https://")), "an http(s) URL"),
    "api_key_env": ("API_KEY_ENV", _text, lambda v: v.replace("_", "").isalnum(), "a variable name"),
    "temperature": ("TEMPERATURE", _number, lambda v: 0.0 <= v <= 2.0, "a number from 0 to 2"),
    "max_tokens": ("MAX_TOKENS", _count, lambda v: v > 0, "a positive whole number"),
    "timeout_s": ("TIMEOUT_S", _number, lambda v: v > 0, "a positive number of seconds"),
    "max_retries": ("MAX_RETRIES", _count, lambda v: v >= 0, "a whole number, 0 or more"),
    "structured_output": (
        "STRUCTURED_OUTPUT",
        _methods,
        _known_methods,
        f"a comma list of distinct methods from {', '.join(STRUCTURED_METHODS)}",
    ),
}
SETTINGS: tuple[str, ...] = tuple(_SPECS)


def _parse(setting: str, value: Any, source: str) -> Any:
    _, parser, check, wanted = _SPECS[setting]
    try:
        parsed = parser(value)
        ok = check(parsed)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise LLMSettingsError(f"{source}={value!r} is not {wanted}")
    return parsed


def _unset(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return not value
    return value is None or (isinstance(value, str) and not value.strip())


def _role_overrides(context: Context, role: str) -> dict[str, Any]:
    roles = context.llm_roles or {}
    if not isinstance(roles, Mapping):
        raise LLMSettingsError(
            f"Context.llm_roles must map role names to settings, got {type(roles).__name__}"
        )
    unknown_roles = sorted(set(roles) - set(ROLES))
    if unknown_roles:
        raise LLMSettingsError(
            f"Context.llm_roles names unknown role(s) {', '.join(unknown_roles)}; roles: {', '.join(ROLES)}"
        )
    overrides = roles.get(role) or {}
    if not isinstance(overrides, Mapping):
        raise LLMSettingsError(f"Context.llm_roles[{role!r}] must be a mapping of settings")
    unknown = sorted(set(overrides) - set(SETTINGS))
    if unknown:
        raise LLMSettingsError(
            f"Context.llm_roles[{role!r}] has unknown setting(s) {', '.join(unknown)}; settings: {', '.join(SETTINGS)}"
        )
    return dict(overrides)


def resolve_role_settings(
    context: Context, role: str, environ: Mapping[str, str] | None = None
) -> RoleSettings:
    """The settings `role` runs with; `LLMSettingsError` for an unknown role or a bad value."""
    if role not in ROLES:
        raise LLMSettingsError(f"unknown LLM role {role!r}; roles: {', '.join(ROLES)}")
    env = os.environ if environ is None else environ
    overrides = _role_overrides(context, role)
    role_env = f"STITCHCUDA_{role.upper()}_"

    def pick(setting: str) -> Any:
        suffix = _SPECS[setting][0]
        sources: list[tuple[str, Any]] = [
            (f"Context.llm_roles[{role!r}][{setting!r}]", overrides.get(setting))
        ]
        if setting == "model":
            sources.append((f"Context.{role}_model", getattr(context, f"{role}_model", "")))
        sources += [
            (role_env + suffix, env.get(role_env + suffix)),
            (f"Context.llm_{setting}", getattr(context, f"llm_{setting}", None)),
            ("STITCHCUDA_LLM_" + suffix, env.get("STITCHCUDA_LLM_" + suffix)),
        ]
        if setting == "base_url":
            sources.append(("OPENAI_BASE_URL", env.get("OPENAI_BASE_URL")))
        for source, value in sources:
            if not _unset(value):
                return _parse(setting, value, source)
        return None

    model = pick("model")
    if model is None:
        raise LLMSettingsError(
            f"no model named for the {role}: set STITCHCUDA_{role.upper()}_MODEL or STITCHCUDA_LLM_MODEL "
            f"(or Context.{role}_model / Context.llm_model)"
        )
    api_key_env = pick("api_key_env")
    if api_key_env is None:
        api_key_env = (
            role_env + "API_KEY" if not _unset(env.get(role_env + "API_KEY")) else DEFAULT_KEY_VARIABLE
        )
    timeout_s = pick("timeout_s")
    max_retries = pick("max_retries")
    structured_output = pick("structured_output")
    return RoleSettings(
        role=role,
        model=model,
        base_url=pick("base_url"),
        api_key_env=api_key_env,
        temperature=pick("temperature"),
        max_tokens=pick("max_tokens"),
        timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
        max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
        structured_output=STRUCTURED_METHODS if structured_output is None else structured_output,
    )
