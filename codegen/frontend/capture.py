"""Trace a reference `Model` with torch.fx on the meta device, recording every node's value.

Problems are sized for an H200 (gigabytes of input), so nothing here allocates real data: the model
is built under `torch.device("meta")`, `get_inputs()` runs under the same context, and every traced
node is evaluated on meta tensors while the tracer records it. That gives shapes for free (no
separate ShapeProp pass) and also the values of scalar nodes such as `x.size(-1)`.

Plain symbolic tracing is tried first. When it fails because Python control flow depends on a size
(`for t in range(x.size(1))`), a second pass makes size queries concrete: the loop unrolls and the
program becomes specialised to the traced input shapes (the generated forward checks them).
"""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from tools.problem import exec_problem_source
from tools.worker import timing_window

try:  # evaluating a leaf module inside the trace must not re-enter fx's patched Module.__call__
    from torch.fx._symbolic_trace import _maybe_revert_all_patches as _unpatched
except ImportError:  # pragma: no cover - older torch
    _unpatched = contextlib.nullcontext

# Methods and attributes whose results are sizes; concrete tracing answers them with Python ints.
_SIZE_METHODS = frozenset({"size", "dim", "numel", "nelement"})
_SIZE_ATTRS = frozenset({"shape", "ndim"})


class TraceFailure(Exception):
    """The reference cannot be traced into a graph we can regenerate; str() is one line."""


@dataclass
class TracedModel:
    """An fx graph of the reference forward plus the meta value of every node."""

    graph: fx.Graph
    root: nn.Module
    values: dict[str, Any]
    forward_params: list[str]
    concrete: bool = False
    input_values: list[Any] = field(default_factory=list)

    @property
    def nodes(self) -> list[fx.Node]:
        return list(self.graph.nodes)

    def value(self, node: fx.Node) -> Any:
        return self.values.get(node.name)


@dataclass
class MetaProblem:
    """The problem module plus its model and inputs built on the meta device."""

    module: types.ModuleType
    model: nn.Module
    inputs: list[Any]
    init_inputs: list[Any]


def load_meta_problem(source: str, name: str, filename: str = "<problem>") -> MetaProblem:
    """Execute the problem source and build `Model(*get_init_inputs())` and its inputs on meta."""
    module = exec_problem_source(source, name, filename)
    init_inputs = list(module.get_init_inputs())
    with torch.device("meta"):
        model = module.Model(*init_inputs)
        inputs = list(module.get_inputs())
    for i, value in enumerate(inputs):
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            inputs[i] = value.to("meta")
    return MetaProblem(module=module, model=model, inputs=inputs, init_inputs=init_inputs)


def _unwrap(tracer: _MetaTracer, value: Any) -> Any:
    """Replace proxies in an argument structure by the meta values they stand for."""
    if isinstance(value, fx.Proxy):
        return tracer.values[value.node]
    if isinstance(value, fx.Node):
        return tracer.values[value]
    if isinstance(value, tuple):
        return tuple(_unwrap(tracer, v) for v in value)
    if isinstance(value, list):
        return [_unwrap(tracer, v) for v in value]
    if isinstance(value, dict):
        return {k: _unwrap(tracer, v) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(_unwrap(tracer, value.start), _unwrap(tracer, value.stop), _unwrap(tracer, value.step))
    return value


class _MetaProxy(fx.Proxy):
    """A proxy that, in concrete mode, answers shape queries with the traced meta shape."""

    def __getattr__(self, k: str) -> Any:
        tracer = self.tracer
        if isinstance(tracer, _MetaTracer) and tracer.concrete and k in _SIZE_ATTRS:
            value = tracer.values.get(self.node)
            if isinstance(value, torch.Tensor):
                return tuple(value.shape) if k == "shape" else value.dim()
        return super().__getattr__(k)

    def __len__(self) -> int:
        tracer = self.tracer
        if isinstance(tracer, _MetaTracer) and tracer.concrete:
            value = tracer.values.get(self.node)
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                return int(value.shape[0])
        return super().__len__()


class _MetaTracer(fx.Tracer):
    """fx tracer that evaluates each new node on meta values as it records it."""

    def __init__(self, inputs: list[Any], concrete: bool) -> None:
        super().__init__()
        self._inputs = list(inputs)
        self._placeholder_index = 0
        self.concrete = concrete
        self.values: dict[fx.Node, Any] = {}

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _MetaProxy(node, self)

    def create_proxy(
        self,
        kind: str,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str | None = None,
        type_expr: Any | None = None,
        proxy_factory_fn: Any = None,
    ) -> Any:
        if self.concrete and kind == "call_method" and target in _SIZE_METHODS:
            return self._evaluate(kind, target, args, kwargs)
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        if kind == "placeholder":
            if self._placeholder_index >= len(self._inputs):
                raise TraceFailure("forward takes more arguments than get_inputs() returns")
            value = self._inputs[self._placeholder_index]
            self._placeholder_index += 1
        elif kind == "output":
            value = None
        else:
            value = self._evaluate(kind, target, args, kwargs)
        self.values[proxy.node] = value
        return proxy

    def _evaluate(self, kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        args_v = _unwrap(self, args)
        kwargs_v = _unwrap(self, kwargs)
        with _unpatched():
            return self._run(kind, target, args_v, kwargs_v)

    def _run(self, kind: str, target: Any, args_v: Any, kwargs_v: Any) -> Any:
        if kind == "call_function":
            return target(*args_v, **kwargs_v)
        if kind == "call_method":
            return getattr(args_v[0], target)(*args_v[1:], **kwargs_v)
        if kind == "call_module":
            return self.root.get_submodule(target)(*args_v, **kwargs_v)
        if kind == "get_attr":
            obj: Any = self.root
            for part in target.split("."):
                obj = getattr(obj, part)
            return obj
        raise TraceFailure(f"unexpected node kind {kind}")


def _attribute_names(model: nn.Module) -> set[str]:
    names: set[str] = set()
    for prefix, module in model.named_modules():
        for attr in module.__dict__:
            names.add(f"{prefix}.{attr}" if prefix else attr)
        for attr in list(module._parameters) + list(module._buffers) + list(module._modules):
            names.add(f"{prefix}.{attr}" if prefix else attr)
    return names


def _check_no_state_writes(model: nn.Module) -> None:
    """A forward that assigns to module attributes has state our regenerated forward would drop."""
    for prefix, module in model.named_modules():
        for attr, value in module.__dict__.items():
            if isinstance(value, fx.Proxy):
                where = f"{prefix}.{attr}" if prefix else attr
                raise TraceFailure(f"forward assigns self.{where}; state writes are not regenerated")


def _trace_once(model: nn.Module, inputs: list[Any], concrete: bool) -> TracedModel:
    before = _attribute_names(model)
    tracer = _MetaTracer(inputs, concrete)
    try:
        graph = tracer.trace(model)
    except TraceFailure:
        raise
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceFailure(f"{type(exc).__name__}: {message}") from None
    _check_no_state_writes(model)
    params: list[str] = []
    for node in graph.nodes:
        if node.op == "placeholder":
            params.append(node.name)
        if node.op == "get_attr" and node.target not in before:
            raise TraceFailure(f"the trace created a constant {node.target!r} the model does not own")
    if len(params) != len(inputs):
        raise TraceFailure(f"forward takes {len(params)} arguments but get_inputs() returns {len(inputs)}")
    values = {node.name: value for node, value in tracer.values.items()}
    return TracedModel(
        graph=graph,
        root=model,
        values=values,
        forward_params=params,
        concrete=concrete,
        input_values=list(inputs),
    )


def trace_problem(source: str, name: str) -> tuple[MetaProblem, TracedModel]:
    """Trace symbolically; fall back to concrete sizes; raise TraceFailure when both fail.

    Each attempt builds a fresh meta model, because a failed trace may have left proxies behind.
    Tracing is CPU work, so it runs outside any timing on this machine (tools.worker.timing_window).
    """
    with timing_window.busy():
        return _trace_problem(source, name)


def _trace_problem(source: str, name: str) -> tuple[MetaProblem, TracedModel]:
    problem = load_meta_problem(source, name)
    try:
        return problem, _trace_once(problem.model, problem.inputs, concrete=False)
    except TraceFailure as first:
        problem = load_meta_problem(source, name)
        try:
            return problem, _trace_once(problem.model, problem.inputs, concrete=True)
        except TraceFailure as second:
            raise TraceFailure(f"{first}; with concrete sizes: {second}") from None
