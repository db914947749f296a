"""Emit Python statements that replay fx nodes as the reference's own PyTorch calls.

Reference groups (and views, size arithmetic, ...) stay PyTorch in the generated forward. Every
callable is spelled so that it resolves in the generated program's namespace (torch, operator, math,
or a helper copied from the problem file), and that spelling is checked against the traced target,
so an unreproducible call is caught at plan time rather than in the worker.
"""

from __future__ import annotations

import builtins
import contextlib
import keyword
import math
import operator
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from codegen.frontend.ops import python_attr_path

RUNTIME_MODULE = "codegen.emit.runtime"  # helpers the program carries (assemble._runtime_source)


class EmitError(ValueError):
    """A node cannot be written back as Python; str() is one line."""


_INFIX = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.truediv: "/",
    operator.floordiv: "//",
    operator.mod: "%",
    operator.pow: "**",
    operator.matmul: "@",
    # comparisons and bitwise ops: a mask that stays PyTorch (or a demoted one) is written back as is
    operator.eq: "==",
    operator.ne: "!=",
    operator.lt: "<",
    operator.le: "<=",
    operator.gt: ">",
    operator.ge: ">=",
    operator.and_: "&",
    operator.or_: "|",
    operator.xor: "^",
}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}


def float_literal(value: float) -> str:
    """A Python expression for a float, infinities and NaN included (their repr is no literal)."""
    if math.isnan(value):
        return "float('nan')"
    if math.isinf(value):
        return "float('inf')" if value > 0 else "float('-inf')"
    return repr(value)


class ForwardEmitter:
    """Names the nodes of one graph and writes each as a statement."""

    def __init__(self, graph: fx.Graph, param_names: list[str], namespace: dict[str, Any]) -> None:
        self.namespace = dict(namespace)
        self.namespace.setdefault("torch", torch)
        self.namespace.setdefault("nn", nn)
        self.namespace.setdefault("F", F)
        self.namespace.setdefault("operator", operator)
        self.namespace.setdefault("math", math)
        self.names: dict[fx.Node, str] = {}
        self.runtime_helpers: set[str] = set()  # runtime helpers the written statements call
        taken = set(self.namespace) | set(dir(builtins)) | {"self"} | set(param_names)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(param_names):
            raise EmitError(f"graph has {len(placeholders)} inputs, forward has {len(param_names)}")
        for node, name in zip(placeholders, param_names, strict=True):
            self.names[node] = name
        for node in graph.nodes:
            if node.op == "placeholder":
                continue
            name = node.name
            while (
                name in taken
                or keyword.iskeyword(name)
                or name.startswith("_stitch")
                or name.startswith("_g")
            ):
                # the program's own names start with _stitch / _g: a node named like one moves aside
                name = f"v{name}" if name.startswith("_") else f"{name}_v"
            taken.add(name)
            self.names[node] = name

    # ---- arguments -------------------------------------------------------------------------------
    def arg(self, value: Any) -> str:
        """A Python expression for an fx argument (nodes by name, constants as literals)."""
        if isinstance(value, fx.Node):
            return self.names[value]
        if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
            return repr(value)
        if isinstance(value, float):
            return float_literal(value)
        if isinstance(value, torch.Size):
            return self.arg(tuple(value))
        if isinstance(value, tuple):
            inner = ", ".join(self.arg(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, list):
            return "[" + ", ".join(self.arg(v) for v in value) + "]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{self.arg(k)}: {self.arg(v)}" for k, v in value.items()) + "}"
        if isinstance(value, slice):
            return f"slice({self.arg(value.start)}, {self.arg(value.stop)}, {self.arg(value.step)})"
        if value is Ellipsis:
            return "..."
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, torch.device):
            if value.type == "meta":
                raise EmitError("a meta device constant would be baked into the program")
            return f"torch.device({str(value)!r})"
        if isinstance(value, (torch.memory_format, torch.layout)):
            return str(value)
        raise EmitError(f"cannot write a {type(value).__name__} constant")

    def _index(self, value: Any) -> str:
        """Subscript syntax: slices as a:b:c."""
        if isinstance(value, slice):
            parts = ["" if v is None else self.arg(v) for v in (value.start, value.stop, value.step)]
            text = f"{parts[0]}:{parts[1]}"
            return f"{text}:{parts[2]}" if parts[2] else text
        return self.arg(value)

    def _call_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        parts = [self.arg(a) for a in args] + [f"{k}={self.arg(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)

    # ---- callables -----------------------------------------------------------------------------
    def function_text(self, fn: Any) -> str:
        """How the program spells `fn`; checked by evaluating the spelling in the program namespace.
        A runtime helper (codegen/emit/runtime.py, e.g. `_stitch_nll_pick` written by a
        decomposition) is spelled by its name; the program then carries its source."""
        if getattr(fn, "__module__", "") == RUNTIME_MODULE and getattr(fn, "__name__", "").startswith(
            "_stitch"
        ):
            self.runtime_helpers.add(fn.__name__)
            return str(fn.__name__)
        candidates: list[str] = []
        with contextlib.suppress(Exception):  # not every callable has a qualified name
            candidates.append(torch.fx.node._get_qualified_name(fn))
        module = getattr(fn, "__module__", None) or ""
        name = getattr(fn, "__qualname__", getattr(fn, "__name__", ""))
        if module and name:
            candidates.append(f"{module}.{name}")
        if name:
            candidates.append(name)
        for text in candidates:
            text = (
                text.replace("torch.nn.functional.", "F.", 1)
                if text.startswith("torch.nn.functional.")
                else text
            )
            if self._resolves_to(text, fn):
                return text
        raise EmitError(f"cannot spell the callable {getattr(fn, '__name__', fn)!r} in the program")

    def _resolves_to(self, text: str, fn: Any) -> bool:
        head = text.split(".")[0]
        if not head.isidentifier():
            return False
        try:
            obj: Any = self.namespace[head] if head in self.namespace else getattr(builtins, head)
            for part in text.split(".")[1:]:
                obj = getattr(obj, part)
        except AttributeError:
            return False
        return obj is fn

    # ---- statements ----------------------------------------------------------------------------
    def expression(self, node: fx.Node) -> str:
        """The right-hand side that recomputes `node` with PyTorch."""
        args, kwargs = node.args, node.kwargs
        if node.op == "get_attr":
            return python_attr_path(str(node.target))
        if node.op == "call_module":
            return f"{python_attr_path(str(node.target))}({self._call_args(args, kwargs)})"
        if node.op == "call_method":
            if not args:
                raise EmitError(f"method call {node.target} without a receiver")
            return f"{self.arg(args[0])}.{node.target}({self._call_args(args[1:], kwargs)})"
        if node.op != "call_function":
            raise EmitError(f"unexpected node kind {node.op}")
        fn = node.target
        if not kwargs:
            if fn in _INFIX and len(args) == 2:
                return f"{self.arg(args[0])} {_INFIX[fn]} {self.arg(args[1])}"
            if fn in _UNARY and len(args) == 1:
                return f"{_UNARY[fn]}{self.arg(args[0])}"
            if fn is operator.getitem and len(args) == 2:
                index = args[1]
                if isinstance(index, tuple) and index:
                    return f"{self.arg(args[0])}[{', '.join(self._index(i) for i in index)}]"
                return f"{self.arg(args[0])}[{self._index(index)}]"
            if (
                fn is builtins.getattr
                and len(args) == 2
                and isinstance(args[1], str)
                and args[1].isidentifier()
            ):
                return f"{self.arg(args[0])}.{args[1]}"
        return f"{self.function_text(fn)}({self._call_args(args, kwargs)})"

    def statement(self, node: fx.Node) -> str:
        if node.op == "output":
            return f"return {self.arg(node.args[0])}"
        return f"{self.names[node]} = {self.expression(node)}"
