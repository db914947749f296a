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
- attention modules and functions are recorded as the operators they are made of (decompose.py),
  and attention written out by hand as one fused call where it provably matches (attention_chain.py);
- buffers are read as graph attributes, so masks sliced from them are graph ops, not constants;
- when a user submodule's forward cannot be traced, it is kept as one node and the trace is tried
  again, so only that submodule (not the model) is listed whole; only a forward that fails in the
  root's own code (or data-dependent Python, which meta tensors cannot answer) is left whole.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch import nn
from torch.fx._symbolic_trace import _assert_is_none

from codegen.frontend.attention_chain import fuse_attention_chains
from codegen.frontend.attention_ops import unfuse_read_weights
from codegen.frontend.decompose import FUNCTION_DECOMPOSITIONS, METHOD_DECOMPOSITIONS, MODULE_DECOMPOSITIONS
from codegen.frontend.decompose_layout import AUTOWRAP_FUNCTIONS
from tools.meta_rnn import MetaRnnShapes
from tools.problem import exec_problem_source, is_meta_unsupported
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
    # forward's trailing parameters traced at their defaults (the program checks them at run time)
    defaults: dict[str, Any] = field(default_factory=dict)
    # attributes the forward assigns (`self.hidden = ...`), in the order of the extra outputs: the
    # graph returns (result, *state values) and the program stores each before returning the result
    state_writes: list[str] = field(default_factory=list)
    # calls written out by a decomposition (decompose.py): the graph computes PyTorch's formula,
    # not PyTorch's fused kernel, so its float32 rounding may differ by an ulp or so
    decomposed: bool = False

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
    """Execute the problem source and build `Model(*get_init_inputs())` and its inputs on meta.

    A constructor that needs real values (`[r.item() for r in torch.linspace(...)]` for drop-path
    rates) cannot run on meta; it is built on the CPU instead and its parameters and buffers moved
    to meta, with the global RNG left as it was."""
    module = exec_problem_source(source, name, filename)
    init_inputs = list(module.get_init_inputs())
    try:
        with torch.device("meta"):
            model = module.Model(*init_inputs)
    except Exception as exc:
        if not is_meta_unsupported(exc):
            raise
        with torch.random.fork_rng(devices=[]), torch.device("cpu"):
            model = module.Model(*init_inputs).to("meta")
        for owner in model.modules():  # plain tensor attributes too (Module.to moves only its own)
            for attr, value in list(owner.__dict__.items()):
                if isinstance(value, torch.Tensor):
                    object.__setattr__(owner, attr, value.to("meta"))
    with torch.device("meta"):
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


# What torch makes of a Python type passed as a dtype (`torch.ones(n, dtype=bool)`).
_PYTHON_DTYPES: dict[Any, torch.dtype] = {bool: torch.bool, int: torch.int64, float: torch.float64}


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
        super().__init__(autowrap_functions=AUTOWRAP_FUNCTIONS)  # einops' functions become graph calls
        self.proxy_buffer_attributes = True  # masks sliced from buffers become graph ops
        self._inputs = list(inputs)
        self._placeholder_index = 0
        self.concrete = concrete
        self.leaves = leaves  # submodule paths kept as one node (their own trace is inlined later)
        self.values: dict[fx.Node, Any] = {}
        self.failed_in: str | None = None  # the innermost submodule whose forward raised
        self.specialised = False  # a decomposition baked the traced sizes into the graph
        self.decomposed: list[fx.Node] = []
        self.defaults_used: list[Any] = []  # values of the trailing parameters traced at their defaults

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _MetaProxy(node, self)

    def create_arg(self, a: Any) -> Any:
        """`dtype=bool` (a Python type where torch takes a dtype) as the torch.dtype it stands for."""
        if isinstance(a, type) and a in _PYTHON_DTYPES:
            return _PYTHON_DTYPES[a]
        return super().create_arg(a)

    def to_bool(self, obj: fx.Proxy) -> bool:
        """In concrete mode, a branch on metadata (`if x.device != w.device: raise`) takes the way
        the meta values take; a branch on data (a meta tensor, no value) still fails the trace."""
        value = self.values.get(obj.node)
        if self.concrete and isinstance(value, bool):
            return value
        return super().to_bool(obj)

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
        decomposition = None
        if kind == "call_function":
            decomposition = FUNCTION_DECOMPOSITIONS.get(target)
        elif kind == "call_method" and isinstance(target, str):
            decomposition = METHOD_DECOMPOSITIONS.get(target)
        if decomposition is not None:
            result = self._decompose(decomposition, *args, **kwargs)
            if result is not NotImplemented:
                return result
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        if kind == "placeholder":
            if self._placeholder_index < len(self._inputs):
                value = self._inputs[self._placeholder_index]
            elif args:  # a parameter get_inputs() leaves out, traced at its default (_defaults)
                value = args[0]
                self.defaults_used.append(value)
            else:
                raise TraceFailure("forward takes more arguments than get_inputs() returns")
            self._placeholder_index += 1
        elif kind == "output":
            value = None
        else:
            value = self._evaluate(kind, target, args, kwargs)
        self.values[proxy.node] = value
        return proxy

    def _decompose(self, decomposition: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Record `decomposition`'s operators in place of one call; NotImplemented records nothing, as
        does a call whose arguments the decomposition's signature does not take (a legacy form)."""
        try:
            inspect.signature(decomposition).bind(self, *args, **kwargs)
        except TypeError:
            return NotImplemented
        count = len(self.graph.nodes)
        result = decomposition(self, *args, **kwargs)
        recorded = list(self.graph.nodes)[count:]
        if result is NotImplemented:  # what it recorded before giving up is read by nothing
            for node in reversed(recorded):
                if not node.users:
                    self.graph.erase_node(node)
                    self.values.pop(node, None)
        else:
            self.specialised = True
            self.decomposed += recorded
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
            with MetaRnnShapes():  # a recurrent layer's shapes without its step-by-step meta kernel
                return self.root.get_submodule(target)(*args_v, **kwargs_v)
        if kind == "get_attr":
            return _resolve(self.root, target)
        raise TraceFailure(f"unexpected node kind {kind}")


def _attribute_names(model: nn.Module) -> set[str]:
    names: set[str] = set()
    for prefix, module in model.named_modules():
        for attr in module.__dict__:
            names.add(f"{prefix}.{attr}" if prefix else attr)
        for attr in list(module._parameters) + list(module._buffers) + list(module._modules):
            names.add(f"{prefix}.{attr}" if prefix else attr)
    return names


def _resolve(model: nn.Module, path: str) -> Any:
    obj: Any = model
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _attribute_values(model: nn.Module) -> dict[tuple[str, str], Any]:
    """Every module's own attributes before the trace, so assignments made by forward can be undone."""
    return {
        (prefix, attr): value
        for prefix, module in model.named_modules()
        for attr, value in module.__dict__.items()
    }


def _take_state_writes(model: nn.Module, before: dict[tuple[str, str], Any]) -> list[tuple[str, fx.Node]]:
    """The attributes forward assigned (`self.hidden = proxy`), each put back as it was before.

    The model stays usable (no proxy left on it); the regenerated forward makes the same
    assignments from the values the graph returns (`TracedModel.state_writes`)."""
    writes: list[tuple[str, fx.Node]] = []
    for prefix, module in model.named_modules():
        for attr, value in list(module.__dict__.items()):
            if not isinstance(value, fx.Proxy):
                continue
            writes.append((f"{prefix}.{attr}" if prefix else attr, value.node))
            if (prefix, attr) in before:
                object.__setattr__(module, attr, before[(prefix, attr)])
            else:
                delattr(module, attr)
    return writes


def _latest_versions(graph: fx.Graph, values: dict[fx.Node, Any]) -> dict[fx.Node, fx.Node]:
    """Functionalise in-place methods: later readers of a tensor an in-place call changed read the
    call's result instead, so every op of the graph is a pure function of its arguments.

    `h.copy_(src)` becomes `src.expand_as(h)`; `t.add_(1)` keeps its node (the classifier maps it to
    `add`). Only tensors that are no view and no forward input are rewritten: writing through a view
    or into the caller's tensor has effects a pure graph cannot express, and those calls stay as
    they are. Returns each rewritten tensor's latest version (for attribute writes)."""
    first_read: dict[Any, fx.Node] = {}
    for node in list(graph.nodes):  # fx reads an attribute anew at every access: one node per attribute
        if node.op == "get_attr":
            kept = first_read.setdefault(node.target, node)
            if kept is not node:
                node.replace_all_uses_with(kept)
                graph.erase_node(node)
    order = {node: i for i, node in enumerate(graph.nodes)}
    latest: dict[fx.Node, fx.Node] = {}
    for node in list(graph.nodes):
        target = node.target
        inplace = isinstance(target, str) and target.endswith("_") and not target.startswith("_")
        if node.op != "call_method" or not inplace or not node.args:
            continue
        dst = node.args[0]
        value = values.get(dst) if isinstance(dst, fx.Node) else None
        if not isinstance(value, torch.Tensor) or dst.op == "placeholder" or value._base is not None:
            continue
        if isinstance(value, nn.Parameter):
            continue  # a parameter cannot be reassigned a plain tensor; the call stays in place
        if target == "copy_" and len(node.args) == 2 and not node.kwargs:
            src = node.args[1]
            src_value = values.get(src) if isinstance(src, fx.Node) else None
            if not isinstance(src_value, torch.Tensor) or src_value.dtype != value.dtype:
                continue
            node.target, node.args = "expand_as", (src, dst)
        for user in list(dst.users):
            if user is not node and order[user] > order[node]:
                user.replace_input_with(dst, node)
        latest[dst] = node
        for older, newer in list(latest.items()):
            if newer is dst:
                latest[older] = node
    return latest


def _inline_trace_constants(
    graph: fx.Graph, model: nn.Module, known: set[str], values: dict[fx.Node, Any]
) -> None:
    """`torch.min(x, torch.tensor(0.5))`: fx stores the tensor made outside the trace as a new model
    attribute. A 0-d float32 constant becomes `torch.tensor(0.5)` in the graph (which the
    classifier folds into its elementwise users); any other constant fails the trace."""
    for node in list(graph.nodes):
        if node.op != "get_attr" or node.target in known:
            continue
        value = getattr(model, str(node.target), None)
        scalar = isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype == torch.float32
        if not isinstance(value, torch.Tensor) or not scalar or value.device.type == "meta":
            raise TraceFailure(f"the trace created a constant {node.target!r} the model does not own")
        with graph.inserting_before(node):
            literal = graph.call_function(torch.tensor, (float(value.item()),))
        node.replace_all_uses_with(literal)
        graph.erase_node(node)
        values[literal] = value
        delattr(model, str(node.target))


def _defaults(model: nn.Module, given: int) -> dict[str, Any]:
    """forward's parameters after the `given` ones that get_inputs() fills, at their defaults.

    `forward(self, x, mask=None)` called with `[x]`: fx specialises `mask` to None (its graph asserts
    it, and the generated forward checks it), so the trace follows the branch the inputs take."""
    try:
        parameters = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return {}
    trailing = parameters[given:]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not all(p.kind in positional and p.default is not inspect.Parameter.empty for p in trailing):
        return {}
    return {p.name: p.default for p in trailing}


def _trace_once(
    model: nn.Module, inputs: list[Any], concrete: bool, leaves: frozenset[str] = frozenset()
) -> TracedModel:
    before = _attribute_names(model)
    attributes = _attribute_values(model)
    defaults = _defaults(model, len(inputs))
    tracer = _MetaTracer(inputs, concrete, leaves)
    try:
        graph = tracer.trace(model, concrete_args=defaults or None)
    except TraceFailure as exc:
        exc.failed_in = exc.failed_in or tracer.failed_in
        raise
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceFailure(f"{type(exc).__name__}: {message}", tracer.failed_in) from None
    writes = _take_state_writes(model, attributes)
    for node in graph.nodes:  # fx reads plain tensor attributes without a proxy: record their values
        if node.op == "get_attr" and node not in tracer.values and node.target in before:
            tracer.values[node] = _resolve(model, str(node.target))
    tracer.drop_unused_decomposed(graph)
    unfuse_read_weights(graph, tracer.values)  # MHA weights that are read keep `weights @ v`
    fuse_attention_chains(graph, tracer.values, model)  # attention written out by hand: one fused call
    _drop_dead_checks(graph)
    _inline_trace_constants(graph, model, before, tracer.values)
    latest = _latest_versions(graph, tracer.values)
    # in-place changes of an attribute's tensor come before any reassignment of the attribute
    inplace = [(str(old.target), new) for old, new in latest.items() if old.op == "get_attr"]
    state = _add_state_outputs(
        graph, inplace + [(path, latest.get(n, n)) for path, n in writes], tracer.values
    )
    params = [node.name for node in graph.nodes if node.op == "placeholder"]
    if len(params) != len(inputs) + len(tracer.defaults_used):
        raise TraceFailure(f"forward takes {len(params)} arguments but get_inputs() returns {len(inputs)}")
    values = {node.name: value for node, value in tracer.values.items() if node.graph is graph}
    return TracedModel(
        graph=graph,
        root=model,
        values=values,
        forward_params=params,
        concrete=concrete or tracer.specialised,
        input_values=[*inputs, *tracer.defaults_used],
        defaults=dict(list(defaults.items())[: len(tracer.defaults_used)]),
        state_writes=state,
        decomposed=any(node.graph is graph for node in tracer.decomposed),
    )


_METADATA_CALLS = frozenset(
    {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge, operator.not_, getattr}
    | {torch._assert, _assert_is_none}
)


def _drop_dead_checks(graph: fx.Graph) -> None:
    """Checks the trace settled (fx's asserts on defaulted parameters, `x.device != w.device` taken at
    trace time) and the metadata reads only they used: pure Python, nothing reads them; the program
    checks the defaults itself (`TracedModel.defaults`)."""
    changed = True
    while changed:
        changed = False
        for node in reversed(list(graph.nodes)):
            if not node.users and node.op == "call_function" and node.target in _METADATA_CALLS:
                graph.erase_node(node)
                changed = True


def _add_state_outputs(
    graph: fx.Graph, writes: list[tuple[str, fx.Node]], values: dict[fx.Node, Any]
) -> list[str]:
    """Return the final value of every assigned attribute after the forward's result (one entry per
    attribute, the last write wins) so the fusion planner materialises it; the attribute paths."""
    final: dict[str, fx.Node] = {}
    for path, node in writes:
        if not isinstance(values.get(node), torch.Tensor):
            raise TraceFailure(f"forward assigns self.{path} a value that is not a tensor")
        final.pop(path, None)
        final[path] = node
    if not final:
        return []
    output = next(n for n in graph.nodes if n.op == "output")
    output.args = ((output.args[0], *final.values()),)
    return list(final)


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
