"""Model settings per role: precedence, fallbacks to OPENAI_*, and one-line errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graph.context import Context, context_fields
from nodes.llm.errors import LLMSettingsError
from nodes.llm.settings import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S, resolve_role_settings

REPO = Path(__file__).resolve().parents[3]


def test_shared_environment_settings_reach_every_role() -> None:
    env = {"STITCHCUDA_LLM_MODEL": "qwen3-32b", "OPENAI_BASE_URL": "http://gpu:8000/v1"}
    for role in ("planner", "coder", "verifier", "judge"):
        settings = resolve_role_settings(Context(), role, env)
        assert settings.model == "qwen3-32b"
        assert settings.base_url == "http://gpu:8000/v1"
        assert settings.api_key_env == "OPENAI_API_KEY"
        assert settings.timeout_s == DEFAULT_TIMEOUT_S
        assert settings.max_retries == DEFAULT_MAX_RETRIES
        assert settings.temperature is None and settings.max_tokens is None


def test_most_specific_source_wins_and_context_beats_environment_at_equal_specificity() -> None:
    env = {
        "STITCHCUDA_LLM_MODEL": "env-shared",
        "STITCHCUDA_CODER_MODEL": "env-coder",
        "STITCHCUDA_CODER_TEMPERATURE": "0.7",
        "STITCHCUDA_LLM_TEMPERATURE": "0.1",
        "STITCHCUDA_LLM_BASE_URL": "http://shared:8000/v1",
        "OPENAI_BASE_URL": "http://openai-fallback/v1",
    }
    context = Context(
        llm_model="ctx-shared",
        coder_model="ctx-coder",
        llm_temperature=0.3,
        llm_roles={"coder": {"base_url": "http://coder-box:30000/v1", "max_tokens": 8192}},
    )
    coder = resolve_role_settings(context, "coder", env)
    assert coder.model == "ctx-coder"  # Context.coder_model over STITCHCUDA_CODER_MODEL
    assert coder.temperature == 0.7  # role-specific env over the shared Context value
    assert coder.base_url == "http://coder-box:30000/v1"  # llm_roles over everything
    assert coder.max_tokens == 8192
    planner = resolve_role_settings(context, "planner", env)
    assert planner.model == "ctx-shared"  # Context.llm_model over STITCHCUDA_LLM_MODEL
    assert planner.temperature == 0.3
    assert planner.base_url == "http://shared:8000/v1"  # STITCHCUDA_LLM_BASE_URL over OPENAI_BASE_URL


def test_role_key_variable_is_used_when_set() -> None:
    env = {"STITCHCUDA_LLM_MODEL": "m", "STITCHCUDA_CODER_API_KEY": "EMPTY", "OPENAI_API_KEY": "sk-x"}
    coder = resolve_role_settings(Context(), "coder", env)
    planner = resolve_role_settings(Context(), "planner", env)
    assert coder.api_key_env == "STITCHCUDA_CODER_API_KEY"
    assert coder.api_key(env) == "EMPTY"  # what vLLM and SGLang accept
    assert planner.api_key_env == "OPENAI_API_KEY"
    named = resolve_role_settings(Context(llm_api_key_env="MY_GATEWAY_KEY"), "judge", env)
    assert named.api_key_env == "MY_GATEWAY_KEY"


def test_missing_key_is_one_line_naming_the_variable() -> None:
    settings = resolve_role_settings(Context(llm_model="m"), "verifier", {})
    with pytest.raises(LLMSettingsError) as info:
        settings.api_key({})
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "verifier" in message and "\n" not in message


def test_missing_model_names_the_variables_to_set() -> None:
    with pytest.raises(LLMSettingsError, match="STITCHCUDA_PLANNER_MODEL or STITCHCUDA_LLM_MODEL"):
        resolve_role_settings(Context(), "planner", {})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"STITCHCUDA_CODER_TEMPERATURE": "warm"},
            "STITCHCUDA_CODER_TEMPERATURE='warm' is not a number from 0 to 2",
        ),
        (
            {"STITCHCUDA_LLM_MAX_TOKENS": "1.5"},
            "STITCHCUDA_LLM_MAX_TOKENS='1.5' is not a positive whole number",
        ),
        ({"STITCHCUDA_CODER_TIMEOUT_S": "-1"}, "STITCHCUDA_CODER_TIMEOUT_S='-1' is not a positive number"),
        ({"STITCHCUDA_LLM_BASE_URL": "gpu:8000"}, "STITCHCUDA_LLM_BASE_URL='gpu:8000' is not an http(s) URL"),
    ],
)
def test_bad_environment_values_name_the_variable(env: dict[str, str], expected: str) -> None:
    with pytest.raises(LLMSettingsError) as info:
        resolve_role_settings(Context(llm_model="m"), "coder", env)
    assert expected in str(info.value)


def test_bad_role_overrides_are_refused() -> None:
    with pytest.raises(LLMSettingsError, match="unknown role"):
        resolve_role_settings(Context(llm_model="m", llm_roles={"critic": {}}), "coder", {})
    with pytest.raises(LLMSettingsError, match="unknown setting"):
        resolve_role_settings(Context(llm_model="m", llm_roles={"coder": {"temp": 1}}), "coder", {})
    with pytest.raises(LLMSettingsError, match="unknown LLM role"):
        resolve_role_settings(Context(llm_model="m"), "reviewer", {})


def test_every_new_context_field_is_described() -> None:
    described = context_fields()
    for name in ("llm_model", "coder_model", "llm_base_url", "llm_api_key_env", "llm_roles", "llm_timeout_s"):
        assert described[name], name


def test_importing_the_policy_builds_no_client() -> None:
    """The graph imports policies lazily, but even importing this one must not load the client stack."""
    code = (
        "import sys, nodes.llm.policy, graph.policy\n"
        "loaded = [m for m in ('openai', 'langchain_openai') if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, env={"PATH": ""}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
