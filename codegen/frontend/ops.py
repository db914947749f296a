"""Classify fx nodes into canonical operators with normalised arguments.

Every node of a traced reference becomes an `OpSpec`: a canonical op kind (relu, linear, softmax, ...),
the template family that could implement it, and its arguments bound by name. The fusion planner works
only on OpSpecs, so the many spellings of one operator (`torch.relu`, `F.relu`, `x.relu()`,
`nn.ReLU`) are resolved here, once: the spelling tables live in codegen/frontend/spellings.py, the
records in codegen/frontend/spec.py, and this module decides what each family's template can take.
"""

from __future__ import annotations

import math
import operator
from typing import Any, cast

import torch
import torch.fx as fx
from torch import nn

from codegen.frontend import activation_ops as act
from codegen.frontend.attention_ops import ATTENTION as ATTENTION  # re-exported
from codegen.frontend.attention_ops import ATTENTION_OPS, classify_attention
from codegen.frontend.axis_ops import AXIS as AXIS  # re-exported with the other family names
from codegen.frontend.axis_ops import (
    AXIS_OPS,
    classify_axis,
    classify_axis_softmax,
    classify_indexed_extremum,
)
from codegen.frontend.capture import TracedModel
from codegen.frontend.constant_ops import fold_tensor_constants
from codegen.frontend.conv_ops import CONV as CONV  # re-exported: every family name is read from here
from codegen.frontend.conv_ops import CONV_OPS, classify_conv

# The family names (codegen.frontend.families), re-exported: every family name is read from ops.
from codegen.frontend.families import ATTR as ATTR
from codegen.frontend.families import BATCH_NORM as BATCH_NORM
from codegen.frontend.families import ELEMENTWISE as ELEMENTWISE
from codegen.frontend.families import GEMM as GEMM
from codegen.frontend.families import INPUT as INPUT
from codegen.frontend.families import LAYER_NORM as LAYER_NORM
from codegen.frontend.families import OTHER as OTHER
from codegen.frontend.families import OUTPUT as OUTPUT
from codegen.frontend.families import REDUCTION as REDUCTION
from codegen.frontend.families import SCALAR as SCALAR
from codegen.frontend.families import SOFTMAX as SOFTMAX
from codegen.frontend.families import VIEW as VIEW
from codegen.frontend.layout_ops import COPY as COPY  # re-exported with the other family names
from codegen.frontend.layout_ops import COPY_OPS, classify_copy, copying_reshape, noop_conversion
from codegen.frontend.mask_ops import (
    COMPARE_OPS,
    MASK_OPS,
    TRIANGLE_MASK_OPS,
    absorbed_comparison,
    absorbed_triangle,
    classify_mask,
    tensor_clamp,
)
from codegen.frontend.norm_ops import NORM as NORM
from codegen.frontend.norm_ops import NORM_OPS, classify_norm
from codegen.frontend.pool_ops import POOL as POOL
from codegen.frontend.pool_ops import POOL_OPS, classify_pool
from codegen.frontend.rnn_ops import RNN as RNN  # re-exported
from codegen.frontend.rnn_ops import RNN_OPS, classify_rnn
from codegen.frontend.scan_ops import SCAN as SCAN  # re-exported with the other family names
from codegen.frontend.scan_ops import SCAN_OPS, classify_scan

# The records, re-exported: the emitters and the schedule import them from here.
from codegen.frontend.spec import ModuleAttr as ModuleAttr
from codegen.frontend.spec import OpSpec as OpSpec
from codegen.frontend.spec import python_attr_path as python_attr_path
from codegen.frontend.spellings import (
    ELEMENTWISE_METHODS,
    ELEMENTWISE_OPS,
    FUNCTIONS,
    GEMMS,
    METHOD_ALIASES,
    MODULES,
    OTHER_METHOD_NAMES,
    REDUCTIONS,
    VIEW_METHODS,
    bind,
    target_text,
)


class Classifier:
    """Turns the nodes of one traced model into OpSpecs."""

    def __init__(self, traced: TracedModel) -> None:
        self.traced = traced
        self.root = traced.root
        self._order = {node: i for i, node in enumerate(traced.graph.nodes)}

    # ---- values ----------------------------------------------------------------------------
    def value(self, ref: Any) -> Any:
        """The meta value of a node or a module attribute; constants as themselves."""
        if isinstance(ref, fx.Node):
            return self.traced.value(ref)
        if isinstance(ref, ModuleAttr):
            owner = self.root.get_submodule(ref.path) if ref.path else self.root
            return getattr(owner, ref.attr)
        return ref

    def is_f32(self, ref: Any) -> bool:
        value = self.value(ref)
        return isinstance(value, torch.Tensor) and value.dtype == torch.float32

    # ---- classification ------------------------------------------------------------------------
    def classify_all(self) -> list[OpSpec]:
        specs = [self.classify(node) for node in self.traced.graph.nodes]
        fold_tensor_constants(specs)
        return specs

    def classify(self, node: fx.Node) -> OpSpec:
        text = target_text(node, self.root) if node.op.startswith("call") else str(node.target)
        if node.op == "placeholder":
            return OpSpec(node, "input", INPUT, text)
        if node.op == "output":
            return OpSpec(node, "output", OUTPUT, text)
        if node.op == "get_attr":
            return OpSpec(node, "attr", ATTR, text)
        value = self.traced.value(node)
        if not isinstance(value, torch.Tensor):
            is_tuple_of_tensors = isinstance(value, tuple) and any(isinstance(v, torch.Tensor) for v in value)
            if not is_tuple_of_tensors:
                return OpSpec(node, "scalar", SCALAR, text)
        op = self._canonical(node)
        spec = OpSpec(node, op, OTHER, text)
        if op == "view" or (node.op == "call_function" and node.target in (operator.getitem, getattr)):
            if not copying_reshape(self, spec):
                spec.op, spec.family = "view", VIEW
            return spec
        if op == "clamp" and tensor_clamp(self, spec):
            return spec
        if op in ELEMENTWISE_OPS:
            self._elementwise(spec)
        elif op in GEMMS:
            self._gemm(spec)
        elif op in ("softmax", "log_softmax"):
            self._softmax(spec)
        elif op == "layer_norm":
            self._layer_norm(spec)
        elif op in REDUCTIONS:
            self._reduction(spec)
        elif op == "batch_norm":
            self._batch_norm(spec)
        elif op in CONV_OPS:
            classify_conv(self, spec)
        elif op in POOL_OPS:
            classify_pool(self, spec)
        elif op in NORM_OPS:
            classify_norm(self, spec)
        elif op in SCAN_OPS:
            classify_scan(self, spec)
        elif op in RNN_OPS:
            classify_rnn(self, spec)
        elif op in ATTENTION_OPS:
            classify_attention(self, spec)
        elif op in AXIS_OPS:
            classify_axis(self, spec)
        elif op in COPY_OPS and not (op in TRIANGLE_MASK_OPS and absorbed_triangle(self, spec)):
            classify_copy(self, spec)
        elif op in MASK_OPS:
            classify_mask(self, spec)
        elif (
            (op in COMPARE_OPS and absorbed_comparison(self, spec))
            or (op in TRIANGLE_MASK_OPS and absorbed_triangle(self, spec))
            or (op == "to" and noop_conversion(self, spec))
        ):
            pass  # a comparison a masked fill absorbs, or a conversion that changes nothing (a view)
        else:
            spec.reason = f"no template for {op}"
        return spec

    def canonical(self, node: fx.Node) -> str:
        """The canonical op kind of a call node (`torch.tril`, `x.tril()` -> "tril")."""
        return self._canonical(node)

    def _canonical(self, node: fx.Node) -> str:
        if node.op == "call_module":
            module = self.root.get_submodule(str(node.target))
            for cls, name in MODULES:
                if type(module) is cls:
                    return name
            return type(module).__name__.lower()
        if node.op == "call_method":
            method = str(node.target)
            name = METHOD_ALIASES.get(method, method)
            if name in VIEW_METHODS:
                return "view"
            if name in ELEMENTWISE_METHODS or name in REDUCTIONS or name in GEMMS:
                return name
            if name in ("softmax", "log_softmax"):
                return name
            return OTHER_METHOD_NAMES.get(name, name)
        return FUNCTIONS.get(id(node.target), getattr(node.target, "__name__", "call"))

    # ---- helpers -----------------------------------------------------------------------------------
    def module_attr(self, spec: OpSpec, attr: str) -> ModuleAttr:
        """A tensor owned by the submodule `spec` calls."""
        return ModuleAttr(str(spec.node.target), attr)

    def reject(self, spec: OpSpec, reason: str) -> None:
        """Leave the node to PyTorch, saying why."""
        spec.family, spec.reason = OTHER, reason

    def _module(self, spec: OpSpec) -> nn.Module | None:
        return self.root.get_submodule(str(spec.node.target)) if spec.node.op == "call_module" else None

    def is_inplace_node(self, node: fx.Node) -> bool:
        """Does the node write into one of its inputs (x.add_(), F.relu(x, inplace=True), ...)?"""
        if node.op == "call_module":
            return bool(getattr(self.root.get_submodule(str(node.target)), "inplace", False))
        if node.op == "call_method":
            return str(node.target).endswith("_") and not str(node.target).startswith("_")
        if node.op == "call_function":
            name = getattr(node.target, "__name__", "")
            if name.endswith("_") and not name.startswith("_"):
                return True
            return bind(node, self._canonical(node)).get("inplace") is True
        return False

    def _inplace_is_safe(self, spec: OpSpec, mutated: Any) -> bool:
        """An in-place op may become out-of-place when nothing can observe the mutation: the tensor
        is an intermediate (not an input, parameter or view) with no later readers and no views."""
        if not isinstance(mutated, fx.Node) or mutated.op in ("placeholder", "get_attr"):
            return False
        if self.classify_family_only(mutated) in (VIEW, INPUT, ATTR):
            return False
        here = self._order[spec.node]
        for user in mutated.users:
            if user is spec.node:
                continue
            if self._order[user] > here or self.classify_family_only(user) == VIEW:
                return False
        return True

    def classify_family_only(self, node: fx.Node) -> str:
        if node.op == "placeholder":
            return INPUT
        if node.op == "get_attr":
            return ATTR
        op = self._canonical(node) if node.op.startswith("call") else node.op
        if op == "view" or (node.op == "call_function" and node.target in (operator.getitem, getattr)):
            return VIEW
        return OTHER

    # ---- families ------------------------------------------------------------------------------------
    def _elementwise(self, spec: OpSpec) -> None:
        node, op = spec.node, spec.op
        module = self._module(spec)
        params: dict[str, Any] = {}
        if module is not None:
            operands: list[Any] = [node.args[0]] if node.args else [node.kwargs.get("input")]
            params.update(_module_params(op, module))
            bound: dict[str, Any] = {}
        else:
            bound = bind(node, op)
            found, params = _elementwise_operands(op, bound)
            if found is None:
                self.reject(spec, params.get("reason", f"unsupported arguments for {op}"))
                return
            operands = found
        if op == "dropout":
            p = params.get("p", 0.5)
            if not isinstance(p, (int, float)) or p != 0:
                self.reject(spec, "dropout with p > 0 is random; kept as PyTorch")
                return
            op = spec.op = "identity"
        for name in act.NUMERIC_PARAMS:
            if params.get(name) is not None and not isinstance(params[name], (int, float)):
                self.reject(spec, f"{op}: non-constant {name}")
                return
        if self.is_inplace_node(node) and not self._inplace_is_safe(spec, operands[0]):
            self.reject(spec, "in-place update of a tensor that is read elsewhere")
            return
        if not self.is_f32(node):
            self.reject(spec, "output is not float32")
            return
        for operand in operands:
            if isinstance(operand, fx.Node):
                value = self.value(operand)
                if isinstance(value, torch.Tensor):
                    if value.dtype != torch.float32:
                        self.reject(spec, "an operand is not float32")
                        return
                elif not isinstance(value, (int, float)) or isinstance(value, bool):
                    self.reject(spec, "an operand is neither a tensor nor a number")
                    return
            elif not isinstance(operand, (int, float)) or isinstance(operand, bool):
                self.reject(spec, "an operand is neither a tensor nor a number")
                return
        spec.family = ELEMENTWISE
        spec.args = {"operands": list(operands), "params": params}

    def _gemm(self, spec: OpSpec) -> None:
        node, op = spec.node, spec.op
        module = self._module(spec)
        if module is not None:
            x = node.args[0] if node.args else node.kwargs.get("input")
            bias = self.module_attr(spec, "bias") if module.bias is not None else None
            args: dict[str, Any] = {"a": x, "weight": self.module_attr(spec, "weight"), "bias": bias}
        else:
            bound = bind(node, op)
            if op == "linear":
                args = {"a": bound.get("input"), "weight": bound.get("weight"), "bias": bound.get("bias")}
            elif op == "addmm":
                if bound.get("beta", 1) != 1 or bound.get("alpha", 1) != 1:
                    self.reject(spec, "addmm with beta or alpha other than 1")
                    return
                args = {"a": bound.get("mat1"), "b": bound.get("mat2"), "bias": bound.get("input")}
            else:
                args = {"a": bound.get("input"), "b": bound.get("other", bound.get("mat2"))}
        a = self.value(args["a"])
        other = self.value(args.get("weight", args.get("b")))
        out = self.traced.value(node)
        tensors = [t for t in (a, other, out) if isinstance(t, torch.Tensor)]
        if len(tensors) != 3 or any(t.dtype != torch.float32 for t in tensors):
            self.reject(spec, f"{op}: operands are not float32 tensors")
            return
        if args.get("bias") is not None and not self.is_f32(args["bias"]):
            self.reject(spec, f"{op}: bias is not a float32 tensor")
            return
        if "weight" in args:
            if other.dim() != 2 or a.dim() < 1:
                self.reject(spec, "linear needs a 2-D weight")
                return
            bias_value = self.value(args["bias"]) if args.get("bias") is not None else None
            if bias_value is not None and bias_value.dim() != 1:
                self.reject(spec, "linear bias is not 1-D")
                return
        else:
            if a.dim() < 2 or other.dim() < 2:
                self.reject(spec, f"{op} with a 1-D operand")
                return
            if other.dim() > 2 and tuple(a.shape[:-2]) != tuple(other.shape[:-2]):
                self.reject(spec, f"{op} with broadcast batch dimensions")
                return
            if op == "addmm":
                bias_value = self.value(args["bias"])
                n = other.shape[-1]
                if tuple(bias_value.shape) not in ((n,), (1, n)):
                    self.reject(spec, "addmm bias is not a row vector")
                    return
        spec.family = GEMM
        spec.args = args

    def _softmax(self, spec: OpSpec) -> None:
        node = spec.node
        module = self._module(spec)
        dim: Any
        dtype: Any
        if module is not None:
            dim, dtype = cast("nn.Softmax | nn.LogSoftmax", module).dim, None
            x = node.args[0]
        else:
            bound = bind(node, spec.op)
            x, dim, dtype = bound.get("input"), bound.get("dim"), bound.get("dtype")
        value = self.value(x)
        if dim is None or not isinstance(dim, int) or dtype is not None:
            self.reject(spec, f"{spec.op} without an explicit int dim (or with a dtype)")
            return
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float32 or value.dim() == 0:
            self.reject(spec, f"{spec.op} of a non-float32 tensor")
            return
        if dim % value.dim() != value.dim() - 1:
            classify_axis_softmax(self, spec, x, dim)
            return
        spec.family = SOFTMAX
        spec.args = {"input": x}

    def _layer_norm(self, spec: OpSpec) -> None:
        node = spec.node
        module = self._module(spec)
        shape: tuple[int, ...]
        weight: Any
        bias: Any
        if module is not None:
            module = cast(nn.LayerNorm, module)
            x = node.args[0]
            shape = tuple(module.normalized_shape)
            weight = self.module_attr(spec, "weight") if module.weight is not None else None
            bias = self.module_attr(spec, "bias") if getattr(module, "bias", None) is not None else None
            eps = float(module.eps)
        else:
            bound = bind(node, "layer_norm")
            x, given = bound.get("input"), bound.get("normalized_shape")
            weight, bias, eps = bound.get("weight"), bound.get("bias"), bound.get("eps", 1e-5)
            if not isinstance(given, (tuple, list)) or not all(isinstance(s, int) for s in given):
                self.reject(spec, "layer_norm with a non-constant normalized_shape")
                return
            shape = tuple(given)
            if not isinstance(eps, (int, float)):
                self.reject(spec, "layer_norm with a non-constant eps")
                return
        value = self.value(x)
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
            self.reject(spec, "layer_norm of a non-float32 tensor")
            return
        for ref in (weight, bias):
            if ref is not None and not self.is_f32(ref):
                self.reject(spec, "layer_norm affine parameters are not float32 tensors")
                return
        spec.family = LAYER_NORM
        spec.args = {"input": x, "norm_numel": math.prod(shape), "weight": weight, "bias": bias, "eps": eps}

    def _reduction(self, spec: OpSpec) -> None:
        node, op = spec.node, spec.op
        bound = bind(node, op)
        x = bound.get("input")
        value = self.value(x)
        if op in ("max", "min"):
            other = bound.get("dim")
            if isinstance(other, fx.Node) and isinstance(self.value(other), torch.Tensor):
                spec.op = "maximum" if op == "max" else "minimum"
                bound = {"input": x, "other": other}
                spec.args = {}
                self._elementwise_from_bound(spec, bound)
                return
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float32 or value.dim() == 0:
            self.reject(spec, f"{op} of a non-float32 tensor")
            return
        if bound.get("dtype") is not None:
            self.reject(spec, f"{op} with a dtype")
            return
        dim = bound.get("dim")
        ndim = value.dim()
        if dim is None or dim == () or dim == []:
            dims = list(range(ndim))
        elif isinstance(dim, int):
            dims = [dim % ndim]
        elif isinstance(dim, (tuple, list)) and all(isinstance(d, int) for d in dim):
            dims = sorted({d % ndim for d in dim})
        else:
            self.reject(spec, f"{op} over a non-constant dim")
            return
        if dims != list(range(dims[0], dims[-1] + 1)):
            self.reject(spec, f"{op} over non-adjacent dims {dims}")
            return
        keepdim = bound.get("keepdim", False)
        if not isinstance(keepdim, bool):
            self.reject(spec, f"{op} with a non-constant keepdim")
            return
        with_indices = op in ("max", "min") and isinstance(dim, int)
        if with_indices:
            users = list(node.users)
            if len(users) != 1 or users[0].target is not operator.getitem or users[0].args[1] != 0:
                classify_indexed_extremum(self, spec)
                return
        spec.family = REDUCTION
        spec.op = {"max": "amax", "min": "amin"}.get(op, op)
        spec.args = {"input": x, "dims": dims, "keepdim": keepdim, "with_indices": with_indices}

    def _elementwise_from_bound(self, spec: OpSpec, bound: dict[str, Any]) -> None:
        operands, params = _elementwise_operands(spec.op, bound)
        if operands is None or not self.is_f32(spec.node):
            self.reject(spec, "unsupported elementwise arguments")
            return
        spec.family = ELEMENTWISE
        spec.args = {"operands": operands, "params": params}

    def _batch_norm(self, spec: OpSpec) -> None:
        module = self._module(spec)
        if module is None:
            self.reject(spec, "functional batch_norm is kept as PyTorch")
            return
        value = self.value(spec.node.args[0])
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float32 or not 2 <= value.dim() <= 5:
            self.reject(spec, "batch_norm of a non-float32 tensor or one of fewer than 2 or more than 5 dims")
            return
        if module.track_running_stats and module.momentum is None:
            self.reject(spec, "batch_norm with cumulative averaging (momentum=None)")
            return
        spec.family = BATCH_NORM
        spec.args = {"input": spec.node.args[0], "module": spec.node.target}


def _module_params(op: str, module: nn.Module) -> dict[str, Any]:
    """The hyper-parameters of an activation module; `op` came from the module's exact class
    (`MODULES`), so each cast names the class the module is."""
    if op in act.ACTIVATION_OPS:
        return act.activation_params(op, vars(module))
    if op == "gelu":
        return {"approximate": cast(nn.GELU, module).approximate}
    if op in ("hardtanh", "relu6"):
        hardtanh = cast(nn.Hardtanh, module)  # nn.ReLU6 is a Hardtanh
        return {"min_val": float(hardtanh.min_val), "max_val": float(hardtanh.max_val)}
    if op == "leaky_relu":
        return {"negative_slope": float(cast(nn.LeakyReLU, module).negative_slope)}
    if op == "elu":
        return {"alpha": float(cast(nn.ELU, module).alpha)}
    if op == "softplus":
        softplus = cast(nn.Softplus, module)
        return {"beta": float(softplus.beta), "threshold": float(softplus.threshold)}
    if op == "dropout":
        return {"p": float(cast(nn.Dropout, module).p)}
    return {}


def _elementwise_operands(op: str, bound: dict[str, Any]) -> tuple[list[Any] | None, dict[str, Any]]:
    """(operands, params) of an elementwise call, or (None, {'reason': ...})."""
    x = bound.get("input")
    params: dict[str, Any] = {}
    if op in ("add", "sub"):
        alpha = bound.get("alpha", 1)
        if not isinstance(alpha, (int, float)):
            return None, {"reason": f"{op} with a non-constant alpha"}
        params["alpha"] = alpha
        return [x, bound.get("other")], params
    if op in ("mul", "maximum", "minimum", "xlogy", "logaddexp"):
        return [x, bound.get("other")], params
    if op == "div":
        if bound.get("rounding_mode") is not None:
            return None, {"reason": "div with a rounding mode"}
        return [x, bound.get("other")], params
    if op == "pow":
        return [x, bound.get("exponent")], params
    if op == "gelu":
        params["approximate"] = bound.get("approximate", "none")
    elif op == "clamp":
        params["min"], params["max"] = bound.get("min"), bound.get("max")
        if params["min"] is None and params["max"] is None:
            return None, {"reason": "clamp without bounds"}
    elif op == "hardtanh":
        params["min_val"], params["max_val"] = bound.get("min_val", -1.0), bound.get("max_val", 1.0)
    elif op == "relu6":
        params["min_val"], params["max_val"] = 0.0, 6.0
    elif op == "leaky_relu":
        params["negative_slope"] = bound.get("negative_slope", 0.01)
    elif op == "elu":
        params["alpha"] = bound.get("alpha", 1.0)
    elif op == "softplus":
        params["beta"], params["threshold"] = bound.get("beta", 1.0), bound.get("threshold", 20.0)
    elif op in act.ACTIVATION_OPS:
        params.update(act.activation_params(op, bound))
    elif op == "dropout":
        training = bound.get("training", True)
        params["p"] = bound.get("p", 0.5) if training is not False else 0.0
    extra = [k for k in bound if k.startswith("arg")]
    if extra:
        return None, {"reason": f"{op} with unexpected extra arguments"}
    return [x], params
