"""The records the frontend hands to the schedule: `OpSpec` (one classified fx node) and `ModuleAttr`.

Why a module of its own: the emitters and the per-family classifiers (conv_ops, pool_ops, ...) need
these plain records and the `self.<path>` spelling of a submodule path, not the classifier with its
tables of PyTorch spellings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx


@dataclass(frozen=True)
class ModuleAttr:
    """A tensor owned by a submodule, read in the generated forward as `self.<path>.<attr>`."""

    path: str
    attr: str

    @property
    def expr(self) -> str:
        return python_attr_path(f"{self.path}.{self.attr}" if self.path else self.attr)


@dataclass
class OpSpec:
    """One node of the reference as the planner sees it."""

    node: fx.Node
    op: str
    family: str
    target: str
    args: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    @property
    def name(self) -> str:
        return self.node.name


def python_attr_path(path: str) -> str:
    """`a.0.b` -> `self.a[0].b` style access that is valid Python for any submodule path."""
    expr = "self"
    for part in path.split("."):
        expr = f"{expr}.{part}" if part.isidentifier() else f"getattr({expr}, {part!r})"
    return expr
