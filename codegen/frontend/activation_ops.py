"""Elementwise activations beyond the core set (SELU, CELU, softsign, log-sigmoid, shrinks).

Why a module of its own: a family of activations added as data, kept out of the classifier (ops.py)
and the core spelling tables (spellings.py); these join the elementwise family through the tables
below (spellings, modules, parameter names and defaults) and codegen/emit/expressions.py.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATION_FUNCTIONS: list[tuple[str, list[Any]]] = [
    ("selu", [F.selu, torch.selu]),
    ("celu", [F.celu, torch.celu]),
    ("softsign", [F.softsign]),
    ("logsigmoid", [F.logsigmoid]),
    ("tanhshrink", [F.tanhshrink]),
    ("hardshrink", [F.hardshrink]),
    ("softshrink", [F.softshrink]),
]
ACTIVATION_MODULES: list[tuple[type, str]] = [
    (nn.SELU, "selu"),
    (nn.CELU, "celu"),
    (nn.Softsign, "softsign"),
    (nn.LogSigmoid, "logsigmoid"),
    (nn.Tanhshrink, "tanhshrink"),
    (nn.Hardshrink, "hardshrink"),
    (nn.Softshrink, "softshrink"),
]
ACTIVATION_OPS = frozenset(name for name, _ in ACTIVATION_FUNCTIONS)
# Positional signatures after `input`, and each parameter's default (PyTorch's).
ACTIVATION_SIGNATURES: dict[str, tuple[str, ...]] = {
    "selu": ("input", "inplace"),
    "celu": ("input", "alpha", "inplace"),
    "hardshrink": ("input", "lambd"),
    "softshrink": ("input", "lambd"),
}
# Parameters of any elementwise op (these and the core ones) that must be Python numbers.
NUMERIC_PARAMS = ("min", "max", "min_val", "max_val", "negative_slope", "alpha", "beta", "threshold", "lambd")
ACTIVATION_DEFAULTS: dict[str, dict[str, float]] = {
    "celu": {"alpha": 1.0},
    "hardshrink": {"lambd": 0.5},
    "softshrink": {"lambd": 0.5},
}


def activation_params(op: str, bound: dict[str, Any]) -> dict[str, Any]:
    """The op's parameters from bound call arguments (or a module's attributes), defaults filled in."""
    return {name: bound.get(name, default) for name, default in ACTIVATION_DEFAULTS.get(op, {}).items()}
