"""The Python helper `_g<id>` of a covered group: it prepares operands and calls the launchers.

Why a module of its own: every group kind's writer fills one `Helper` (its parameters come from the
generated forward, its lines make operands contiguous and compute broadcast strides), so its
naming and argument rules are shared by the emitters of every family.
"""

from __future__ import annotations

from typing import Any

import torch.fx as fx

from codegen.emit.chain import Chain, ChainOp, CodegenError, ModuleRef, Token, is_number, same_ref
from codegen.frontend.ops import ModuleAttr, OpSpec, python_attr_path


class Helper:
    """The Python function `_g<id>` that prepares operands and calls the group's launchers."""

    def __init__(self, gid: str, doc: str, forward_names: dict[fx.Node, str]) -> None:
        self.gid = gid
        self.doc = doc
        self.forward_names = forward_names
        self.params: list[str] = []
        self.call_args: list[str] = []
        self._params_by_ref: list[tuple[Any, str]] = []
        self.locals: dict[Any, str] = {}
        self.lines: list[str] = []
        self.returns: list[str] = []
        self.knobs: dict[str, int] = {}  # launch knob -> default (the program's STITCH_LAUNCH entry)

    @property
    def name(self) -> str:
        return "_" + self.gid.replace(".", "_")

    def ref(self, ref: Any) -> str:
        """The helper-local Python name of an operand (adding a parameter when it comes from forward)."""
        if isinstance(ref, (fx.Node, Token)) and ref in self.locals:
            return self.locals[ref]
        if is_number(ref):
            return repr(float(ref))
        for known, name in self._params_by_ref:
            if same_ref(known, ref):
                return name
        if isinstance(ref, fx.Node):
            expr = self.forward_names[ref]
        elif isinstance(ref, ModuleAttr):
            expr = ref.expr
        elif isinstance(ref, ModuleRef):
            expr = python_attr_path(ref.path)
        else:
            raise CodegenError(f"cannot pass {ref!r} to a group helper")
        name = f"a{len(self.params)}"
        self.params.append(name)
        self.call_args.append(expr)
        self._params_by_ref.append((ref, name))
        return name

    def conv_bias_op(self, conv: OpSpec, source: Any) -> ChainOp:
        """`source + bias` per channel: the first op of a chain that applies a conv's bias outside
        cuDNN (the conv's own epilogue kernel, or its reader's prologue); its key is the conv node,
        so the ops after it read the biased value."""
        bias_c = Token("bias_c", full=False)
        ones = ", ".join(["1"] * conv.args["params"].nd)
        self.lines.append(f"bias_c = {self.ref(conv.args['bias'])}.view(-1, {ones})")
        self.locals[bias_c] = "bias_c"
        return ChainOp("add", [source, bias_c], {}, conv.node)

    def knob(self, name: str, default: int) -> str:
        """A launch knob's value, read at every call from the program's STITCH_LAUNCH table.

        The first knob adds the parameter `launch` (the forward passes STITCH_LAUNCH['<group id>']),
        so identical groups still share one helper while each keeps its own setting. A helper with
        two launches names the second's knobs with a scope ("stats.threads"); a scoped knob takes
        the choices of its last part.
        """
        if not self.knobs:
            self.params.append("launch")
            self.call_args.append(f"STITCH_LAUNCH[{self.gid!r}]")
        self.knobs[name] = default
        return f"launch[{name!r}]"

    def prepare_chain(self, chain: Chain, prefix: str, shape_var: str, compute_shape: bool) -> None:
        """Make full operands contiguous (views: describe their strides), fix the chain's shape,
        compute broadcast (inner, count)."""
        for i, ref in enumerate(chain.full):
            self.lines.append(
                f"{prefix}f{i} = {self.ref(ref)}" + ("" if i in chain.views else ".contiguous()")
            )
        if compute_shape:
            self.lines.append(f"{shape_var} = {self.chain_shape(chain, prefix)}")
        for i in range(1 if compute_shape and chain.full else 0, len(chain.full)):
            self.lines.append(f"_stitch_same_shape({prefix}f{i}, {shape_var})")
        for i in sorted(chain.views):
            self.lines.append(f"{prefix}f{i}, {prefix}f{i}_v = _stitch_view({prefix}f{i})")
        for i, ref in enumerate(chain.bcast):
            self.lines.append(
                f"{prefix}b{i}, {prefix}b{i}_inner, {prefix}b{i}_count = _stitch_bc({self.ref(ref)}, {shape_var})"
            )
        for i, ref in enumerate(chain.scalars):
            self.lines.append(f"{prefix}s{i} = float({self.ref(ref)})")

    def chain_args(self, chain: Chain, prefix: str) -> list[str]:
        """Launcher arguments for the chain's fields, in `Chain.fields` order."""
        args = [f"{prefix}f{i}.data_ptr()" for i in range(len(chain.full))]
        args += [f"{prefix}b{i}.data_ptr()" for i in range(len(chain.bcast))]
        for i in range(len(chain.bcast)):
            args += [f"{prefix}b{i}_inner", f"{prefix}b{i}_count"]
        args += [f"{prefix}s{i}" for i in range(len(chain.scalars))]
        args += [f"*{prefix}f{i}_v" for i in sorted(chain.views)]
        return args

    def chain_shape(self, chain: Chain, prefix: str) -> str:
        """A Python expression for the chain's output shape."""
        if chain.full:
            return f"tuple({prefix}f0.shape)"
        tensors = [self.ref(r) for r in chain.bcast]
        if not tensors:
            raise CodegenError("elementwise chain without tensor operands")
        return f"tuple(torch.broadcast_shapes({', '.join(t + '.shape' for t in tensors)}))"

    def source(self, name: str | None = None) -> str:
        """The function's text; `name` overrides the default `_g<id>` (shared helpers)."""
        body = [f'"""{self.doc}"""'] + self.lines
        if len(self.returns) == 1:
            body.append(f"return {self.returns[0]}")
        else:
            body.append(f"return {', '.join(self.returns)}")
        params = ", ".join(self.params)
        return f"def {name or self.name}({params}):\n" + "\n".join("    " + line for line in body) + "\n"
