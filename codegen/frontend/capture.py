"""Trace a reference `Model` with torch.fx on the meta device, recording every node's value.

Problems are sized for an H200 (gigabytes of input), so nothing here allocates real data: the model
is built under `torch.device("meta")`, `get_inputs()` runs under the same context, and every traced
node is evaluated on meta tensors while the tracer records it. That gives shapes for free (no
separate ShapeProp pass) and also the values of scalar nodes such as `x.size(-1)`.

Plain symbolic tracing is tried first. When it fails because Python control flow depends on a size
(`for t in range(x.size(1))`), a second pass makes size queries concrete: the loop unrolls and the
program becomes specialised to the traced input shapes (the generated forward checks them).

The trace never stops at a whole module when it can go finer:
- PyTorch container modules (`nn.TransformerEncoder`, its layers) are traced into; leaf modules of
  torch.nn without children stay one node, which the classifier maps to an operator;
- attention modules and functions are recorded as the operators they are made of (decompose.py);
- buffers are read as graph attributes, so masks sliced from them are graph ops, not constants;
- when a user submodule's forward cannot be traced, it is kept as one node and the trace is tried
  again, so only that submodule (not the model) is listed whole; only a forward that fails in the
  root's own code (or data-dependent Python, which meta tensors cannot answer) is left whole.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from codegen.frontend.decompose import FUNCTION_DECOMPOSITIONS, MODULE_DECOMPOSITIONS
from codegen.frontend.rnn_ops import rnn_meta_result
from tools.problem import exec_problem_source
from tools.worker import timing_window

_unpatched: Callable[[], contextlib.AbstractContextManager[Any]]
try:  # evaluating a leaf module inside the trace must not re-enter fx's patched Module.__call__
    from torch.fx._symbolic_trace import _maybe_revert_all_patches

    _unpatched = _maybe_revert_all_patches
except ImportError:  # pragma: no cover - older torch
    _unpatched = contextlib.nullcontext

# Methods and attributes whose results are sizes; concrete tracing answers them with Python ints.
_SIZE_METHODS = frozenset({"size", "dim", "numel", "nelement"})
_SIZE_ATTRS = frozenset({"shape", "ndim"})
# Tensor metadata that library modules branch on (fast-path checks); concrete tracing answers them.
_META_ATTRS = frozenset({"is_nested", "dtype", "is_sparse", "is_quantized", "layout", "requires_grad"})


class TraceFailure(Exception):
    """The reference cannot be traced into a graph we can regenerate; str() is one line.

    `failed_in` names the innermost submodule whose forward raised, when it was not the root's."""

    def __init__(self, message: str, failed_in: str | None = None) -> None:
        super().__init__(message)
        self.failed_in = failed_in


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
        if isinstance(tracer, _MetaTracer) and tracer.concrete and k in _SIZE_ATTRS | _META_ATTRS:
            value = tracer.values.get(self.node)
            if isinstance(value, torch.Tensor):
                if k in _META_ATTRS:
                    return getattr(value, k)
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

    def __init__(self, inputs: list[Any], concrete: bool, leaves: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.proxy_buffer_attributes = True  # masks sliced from buffers become graph ops
        self._inputs = list(inputs)
        self._placeholder_index = 0
        self.concrete = concrete
        self.leaves = leaves  # submodule paths kept as one node (their own trace is inlined later)
        self.values: dict[fx.Node, Any] = {}
        self.failed_in: str | None = None  # the innermost submodule whose forward raised
        self.specialised = False  # a decomposition baked the traced sizes into the graph
        self.decomposed: list[fx.Node] = []

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _MetaProxy(node, self)

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        if module_qualified_name in self.leaves:
            return True
        library = m.__module__.startswith(("torch.nn", "torch.ao.nn"))
        if library and next(m.children(), None) is not None:
            return False  # a container of library modules: trace into it
        return super().is_leaf_module(m, module_qualified_name)

    def call_module(self, m: nn.Module, forward: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        decomposition = MODULE_DECOMPOSITIONS.get(type(m))
        if decomposition is not None:
            result = self._decompose(decomposition, m, *args, **kwargs)
            if result is not NotImplemented:
                return result
            return self.create_proxy("call_module", self.path_of_module(m), args, kwargs)
        path = self.path_of_module(m)
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            if self.failed_in is None and path and not self.is_leaf_module(m, path):
                self.failed_in = path
            raise

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
        decomposition = FUNCTION_DECOMPOSITIONS.get(target) if kind == "call_function" else None
        if decomposition is not None:
            result = self._decompose(decomposition, *args, **kwargs)
            if result is not NotImplemented:
                return result
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

    def _decompose(self, decomposition: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Record `decomposition`'s operators in place of one call; NotImplemented records nothing."""
        count = len(self.graph.nodes)
        result = decomposition(self, *args, **kwargs)
        if result is not NotImplemented:
            self.specialised = True
            self.decomposed += list(self.graph.nodes)[count:]
        return result

    def drop_unused_decomposed(self, graph: fx.Graph) -> None:
        """Outputs a decomposition computed that nothing reads (e.g. MHA's averaged weights)."""
        for node in reversed(self.decomposed):
            if not node.users and node.op != "output":
                graph.erase_node(node)
                self.values.pop(node, None)

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
            module = self.root.get_submodule(target)
            shortcut = rnn_meta_result(module, args_v, kwargs_v)
            return module(*args_v, **kwargs_v) if shortcut is None else shortcut
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


def _trace_once(
    model: nn.Module, inputs: list[Any], concrete: bool, leaves: frozenset[str] = frozenset()
) -> TracedModel:
    before = _attribute_names(model)
    tracer = _MetaTracer(inputs, concrete, leaves)
    try:
        graph = tracer.trace(model)
    except TraceFailure as exc:
        exc.failed_in = exc.failed_in or tracer.failed_in
        raise
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceFailure(f"{type(exc).__name__}: {message}", tracer.failed_in) from None
    _check_no_state_writes(model)
    tracer.drop_unused_decomposed(graph)
    params: list[str] = []
    for node in graph.nodes:
        if node.op == "placeholder":
            params.append(node.name)
        if node.op == "get_attr" and node.target not in before:
            raise TraceFailure(f"the trace created a constant {node.target!r} the model does not own")
    if len(params) != len(inputs):
        raise TraceFailure(f"forward takes {len(params)} arguments but get_inputs() returns {len(inputs)}")
    values = {node.name: value for node, value in tracer.values.items() if node.graph is graph}
    return TracedModel(
        graph=graph,
        root=model,
        values=values,
        forward_params=params,
        concrete=concrete or tracer.specialised,
        input_values=list(inputs),
    )


_MAX_LEAVES = 8  # submodules kept whole, one more attempt each


def _trace_module(build: Callable[[], tuple[nn.Module, list[Any]]]) -> TracedModel:
    """Symbolic first; then concrete sizes; then concrete with each submodule whose forward broke the
    trace kept as one node (evaluated on meta), so the rest of the model still lists its real ops.
    `build` returns a fresh (module, inputs) for each attempt: a failed trace may leave proxies behind."""
    model, inputs = build()
    try:
        return _trace_once(model, inputs, concrete=False)
    except TraceFailure as exc:
        first = exc
    leaves: set[str] = set()
    while True:
        model, inputs = build()
        try:
            traced = _trace_once(model, inputs, True, frozenset(leaves))
            break
        except TraceFailure as exc:
            where = exc.failed_in
            if where is None or where in leaves or len(leaves) >= _MAX_LEAVES:
                raise TraceFailure(f"{first}; with concrete sizes: {exc}") from None
            leaves.add(where)
    return traced


def trace_problem(source: str, name: str) -> tuple[MetaProblem, TracedModel]:
    """Trace the problem's Model (see `_trace_module`); raise TraceFailure when even that fails.

    Tracing is CPU work, so it runs outside any timing on this machine (tools.worker.timing_window).
    """
    built: list[MetaProblem] = []

    def build() -> tuple[nn.Module, list[Any]]:
        built.append(load_meta_problem(source, name))
        return built[-1].model, built[-1].inputs

    with timing_window.busy():
        traced = _trace_module(build)
    problem = next(p for p in reversed(built) if p.model is traced.root)
    return problem, traced
