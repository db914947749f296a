"""Run-time settings of one StitchCUDA run (LangGraph's `context_schema`).

Studio renders this dataclass as the run's configuration form, so every field carries a
description. Nothing here opens a client or touches the GPU: it is plain data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Literal


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


@dataclass(kw_only=True)
class Context:
    """Budgets and switches for one run; every loop in the graph is bounded by these."""

    policy: str = field(
        default_factory=lambda: _env("STITCHCUDA_POLICY", "offline"),
        metadata={"description": "Who plans and writes code: 'offline' (built-in, no API key) or 'llm'."},
    )
    max_iterations: int = field(
        default=6,
        metadata={"description": "Most coder turns in one run (writes, fixes and optimisations together)."},
    )
    max_fix_attempts: int = field(
        default=3,
        metadata={"description": "Most consecutive fix turns after a build error or a wrong output."},
    )
    max_optimize_rounds: int = field(
        default=2,
        metadata={"description": "Most optimisation turns after the first verified program."},
    )
    min_gain: float = field(
        default=0.02,
        metadata={"description": "Keep optimising only while the last step gained at least this fraction."},
    )
    wall_time_s: float = field(
        default=1800.0,
        metadata={"description": "Wall-clock budget of the whole run, in seconds."},
    )
    eval_timeout_s: float = field(
        default=600.0,
        metadata={"description": "Limit for one evaluation worker run (build, checks and timing), seconds."},
    )
    gpu_arch: str = field(
        default_factory=lambda: _env("STITCHCUDA_ARCH", "sm_90"),
        metadata={"description": "CUDA architecture to build for, e.g. sm_90 (H100/H200) or sm_80."},
    )
    device: Literal["cuda", "cpu"] = field(
        default="cuda",
        metadata={"description": "Where candidates run; 'cpu' only exercises C++-only programs in tests."},
    )
    tolerance_mode: Literal["kernelbench", "strict"] = field(
        default="strict",
        metadata={
            "description": "Evaluation rules: 'strict' (default: cloned and rotated inputs, both call orders, "
            "poisoned memory, a float64 check, device-wide timing, hack checks) or 'kernelbench' (its exact "
            "methodology, to compare with published numbers)."
        },
    )
    kernelbench_check: bool = field(
        default=True,
        metadata={
            "description": "In strict mode, also check the program the run returns (once, at the end) as "
            "KernelBench's own harness would (its loading, PyTorch's precision defaults); the report names any disagreement."
        },
    )
    correctness_trials: int = field(
        default=5, metadata={"description": "Random input sets the candidate must match the reference on."}
    )
    perf_trials: int = field(
        default=100, metadata={"description": "Timed calls per program (mean reported, cold L2)."}
    )
    tune_budget_s: float = field(
        default_factory=lambda: float(_env("STITCHCUDA_TUNE_BUDGET", "10")),
        metadata={
            "description": "Seconds the launch-knob search may take per passing candidate on a GPU "
            "(docs/autotuning.md); 0 turns launch tuning off."
        },
    )
    compile_modes: str = field(
        default="",
        metadata={
            "description": "Comma list of torch.compile modes (default, max-autotune-no-cudagraphs, "
            "reduce-overhead) the verifier times beside the candidate and eager, in the same interleaved "
            "rounds (docs/timing.md); empty: none (the eval's baseline step times them once per problem)."
        },
    )
    inputs_on_device: bool = field(
        default=True,
        metadata={
            "description": "Draw the seeded test inputs directly on the GPU (fast for multi-GB inputs); "
            "False draws them on the CPU as KernelBench does."
        },
    )
    sandbox: Literal["auto", "required", "off"] = field(
        default_factory=lambda: _env("STITCHCUDA_SANDBOX", "auto"),  # type: ignore[arg-type,return-value]
        metadata={
            "description": "Where generated and reference code runs (docs/sandbox.md): 'auto' (default: the "
            "strongest layers this machine allows, recorded in the report), 'required' (fail when one is "
            "missing) or 'off' (no sandbox, for debugging only)."
        },
    )
    out_dir: str = field(
        default="",
        metadata={"description": "Where finalize writes solution.py and the reports; empty: write nothing."},
    )
    hybrid_start: bool = field(
        default=True,
        metadata={
            "description": "LLM policy: start from the offline policy's verified program when it has one."
        },
    )
    # LLM model settings. Each role (planner, coder, verifier, judge) resolves every setting from the
    # most specific source that names it: llm_roles[role], the role's *_model field,
    # STITCHCUDA_<ROLE>_<SETTING>, the llm_* field, STITCHCUDA_LLM_<SETTING>, then OPENAI_BASE_URL /
    # OPENAI_API_KEY (see nodes/llm/settings.py). Empty or None means "not set here".
    llm_model: str = field(
        default="",
        metadata={
            "description": "LLM policy: model name for every role not given its own; empty: STITCHCUDA_LLM_MODEL."
        },
    )
    planner_model: str = field(
        default="",
        metadata={
            "description": "LLM policy: the planner's model; empty: STITCHCUDA_PLANNER_MODEL, then llm_model."
        },
    )
    coder_model: str = field(
        default="",
        metadata={
            "description": "LLM policy: the coder's model; empty: STITCHCUDA_CODER_MODEL, then llm_model."
        },
    )
    verifier_model: str = field(
        default="",
        metadata={
            "description": "LLM policy: the verifier's model; empty: STITCHCUDA_VERIFIER_MODEL, then llm_model."
        },
    )
    judge_model: str = field(
        default="",
        metadata={
            "description": "LLM policy: the rubric judge's model; empty: STITCHCUDA_JUDGE_MODEL, then llm_model."
        },
    )
    llm_base_url: str = field(
        default="",
        metadata={
            "description": "LLM policy: OpenAI-compatible endpoint, e.g. http://host:8000/v1 for vLLM or SGLang; "
            "empty: STITCHCUDA_LLM_BASE_URL, then OPENAI_BASE_URL, then OpenAI."
        },
    )
    llm_api_key_env: str = field(
        default="",
        metadata={
            "description": "LLM policy: NAME of the environment variable holding the API key (never the key); "
            "empty: STITCHCUDA_<ROLE>_API_KEY when set, else OPENAI_API_KEY. Local servers accept EMPTY."
        },
    )
    llm_temperature: float | None = field(
        default=None,
        metadata={
            "description": "LLM policy: sampling temperature; None: STITCHCUDA_LLM_TEMPERATURE or the server's default."
        },
    )
    llm_max_tokens: int | None = field(
        default=None,
        metadata={
            "description": "LLM policy: most tokens per answer; None: STITCHCUDA_LLM_MAX_TOKENS or the server's limit."
        },
    )
    llm_timeout_s: float | None = field(
        default=None,
        metadata={
            "description": "LLM policy: seconds to wait for one answer; None: STITCHCUDA_LLM_TIMEOUT_S or 600."
        },
    )
    llm_max_retries: int | None = field(
        default=None,
        metadata={
            "description": "LLM policy: client retries on timeouts, 429 and 5xx; None: STITCHCUDA_LLM_MAX_RETRIES or 2."
        },
    )
    llm_structured_output: str = field(
        default="",
        metadata={
            "description": "LLM policy: structured-output methods to try, in order, e.g. 'text' for a server that "
            "honours neither; empty: STITCHCUDA_LLM_STRUCTURED_OUTPUT or 'json_schema,function_calling,text'."
        },
    )
    llm_roles: dict[str, dict[str, Any]] = field(
        default_factory=dict,
        metadata={
            "description": "LLM policy: per-role overrides, e.g. {'coder': {'base_url': 'http://gpu:8000/v1', "
            "'temperature': 0.2}}; keys: model, base_url, api_key_env, temperature, max_tokens, timeout_s, max_retries, "
            "structured_output."
        },
    )


def context_fields() -> dict[str, str]:
    """Field name -> description, for help texts and docs."""
    return {f.name: f.metadata.get("description", "") for f in fields(Context)}
