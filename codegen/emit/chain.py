"""Elementwise chains: ops over a group's external operands, compiled to C statements.

Why a module of its own: every emitter (standalone elementwise kernels, row-kernel prologues and
epilogues, BatchNorm, convolution and pool epilogues) describes its fused math as a `Chain`; the
operand bookkeeping (full operands read with vector loads, broadcast ones by index, scalars as
kernel arguments) lives here once. A full operand that the trace saw as a non-contiguous view (a
transpose, a permute, a slice) is read through its own strides (`Chain.views`), not copied first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from codegen.emit.expressions import INDEX_OPS, c_float, op_expr
from codegen.frontend.ops import Classifier, OpSpec


class CodegenError(ValueError):
    """A group the templates cannot express; str() is one line."""


@dataclass(frozen=True)
class Token:
    """A tensor that exists only inside a group's Python helper (a cuBLASLt result, BN statistics)."""

    name: str
    full: bool


@dataclass(frozen=True)
class ModuleRef:
    """A submodule passed whole to a helper (BatchNorm needs its buffers and hyper-parameters)."""

    path: str


@dataclass
class ChainOp:
    op: str
    operands: list[Any]
    params: dict[str, Any]
    key: Any  # the fx node (or Token) whose value this op defines


@dataclass
class Chain:
    """Elementwise ops over external operands, as C statements."""

    ops: list[ChainOp]
    full: list[Any] = field(default_factory=list)
    bcast: list[Any] = field(default_factory=list)
    scalars: list[Any] = field(default_factory=list)
    views: set[int] = field(default_factory=set)  # indices of `full` read through their strides
    lines: list[str] = field(default_factory=list)
    values: dict[Any, str] = field(default_factory=dict)
    uses_index: bool = False  # an op reads the element's coordinates (`ei`: its linear index)

    def var(self, key: Any) -> str:
        """The C variable holding `key` (an op result, the seed, or an operand)."""
        if key in self.values:
            return self.values[key]
        for i, ref in enumerate(self.full):
            if same_ref(ref, key):
                return f"x_f{i}"
        raise CodegenError(f"value {key} is not available in the chain")

    def fields(self, prefix: str = "") -> list[tuple[str, str]]:
        out = [("const float*", f"{prefix}f{i}") for i in range(len(self.full))]
        out += [("const float*", f"{prefix}b{i}") for i in range(len(self.bcast))]
        for i in range(len(self.bcast)):
            out += [("int64_t", f"{prefix}b{i}_inner"), ("int64_t", f"{prefix}b{i}_count")]
        out += [("float", f"{prefix}s{i}") for i in range(len(self.scalars))]
        out += [("int64_t", f"{prefix}{name}") for i in sorted(self.views) for name in view_fields(i)]
        return out

    def load(self, i: int, index: str = "e") -> str:
        """The C expression of full operand i's element `index`."""
        if i in self.views:
            return f"f{i}[stitch_view_offset({index}, {', '.join(view_fields(i))})]"
        return f"f{i}[{index}]"

    def load4(self, i: int, into: str = "") -> str:
        """The C statement reading full operand i's elements e..e+3 into the float[4] `into` (F<i>)."""
        into = into or f"F{i}"
        if i in self.views:
            return f"stitch_view_ld4(f{i}, e, {', '.join(view_fields(i))}, {into});"
        return f"stitch_ld4(f{i} + e, {into});"

    def aligned(self) -> list[str]:
        """The alignment tests of the operands the vector path reads as float4 at e (views test
        their own rows)."""
        return [f"stitch_aligned16(f{i})" for i in range(len(self.full)) if i not in self.views]

    def loads(self) -> list[str]:
        lines = ["const int64_t ei = e;"] if self.uses_index else []
        lines += [f"const float x_f{i} = {self.load(i)};" for i in range(len(self.full))]
        lines += [
            f"const float x_b{i} = b{i}[stitch_bidx(e, b{i}_inner, b{i}_count)];"
            for i in range(len(self.bcast))
        ]
        return lines


VIEW_DIMS = 6  # STITCH_VIEW_DIMS (templates/common.cuh), _STITCH_VIEW_DIMS (runtime.py)


def view_fields(i: int) -> list[str]:
    """Kernel parameters describing view operand i: packed flags, then sizes and strides."""
    return [f"f{i}_v{j}" for j in range(1 + 2 * VIEW_DIMS)]


def is_view(classifier: Classifier, ref: Any) -> bool:
    """Did the trace see `ref` as a non-contiguous tensor (a view its readers address directly)?"""
    if not isinstance(ref, fx.Node):
        return False
    value = classifier.value(ref)
    return isinstance(value, torch.Tensor) and value.numel() > 1 and not value.is_contiguous()


def rows_read_in_place(classifier: Classifier, chain: Chain) -> Chain:
    """A prologue chain's views, kept only where their innermost dim has unit stride: row kernels,
    pools and norms may load an element more than once, and a strided load at every pass costs
    more than one copy first (an elementwise kernel reads each element once and keeps them all)."""
    chain.views = {i for i in chain.views if int(classifier.value(chain.full[i]).stride()[-1]) == 1}
    return chain


def same_ref(a: Any, b: Any) -> bool:
    """One operand: fx nodes and tokens by identity, constants and module attributes by value."""
    if isinstance(a, (fx.Node, Token)) or isinstance(b, (fx.Node, Token)):
        return a is b
    return a == b


def is_number(value: Any) -> bool:
    """A Python number that becomes a C float literal (bools are not numbers here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def build_chain(
    classifier: Classifier, ops: list[ChainOp], shape: tuple[int, ...], seed: Any = None
) -> Chain:
    """Compile `ops` (in order) into C statements; operands outside the chain become loads."""
    chain = Chain(ops=ops)
    if seed is not None:
        chain.values[seed] = "seed"

    def find(items: list[Any], ref: Any) -> int:
        for i, item in enumerate(items):
            if same_ref(item, ref):
                return i
        items.append(ref)
        return len(items) - 1

    def operand(ref: Any) -> tuple[str, Any]:
        if is_number(ref):
            return c_float(ref), ref
        if isinstance(ref, (fx.Node, Token)) and ref in chain.values:
            return chain.values[ref], None
        if isinstance(ref, Token):
            return (f"x_f{find(chain.full, ref)}" if ref.full else f"x_b{find(chain.bcast, ref)}"), None
        value = classifier.value(ref)
        if is_number(value):
            return f"s{find(chain.scalars, ref)}", value
        if not isinstance(value, torch.Tensor):
            raise CodegenError(f"operand {ref} is neither a tensor nor a number")
        if tuple(value.shape) == tuple(shape):
            i = find(chain.full, ref)
            if is_view(classifier, ref):
                chain.views.add(i)
            return f"x_f{i}", None
        return f"x_b{find(chain.bcast, ref)}", None

    chain.uses_index = any(op.op in INDEX_OPS for op in ops)
    for i, op in enumerate(ops):
        pairs = [operand(r) for r in op.operands]
        expr = op_expr(op.op, [p[0] for p in pairs], op.params, [p[1] for p in pairs])
        chain.lines.append(f"const float v{i} = {expr};")
        chain.values[op.key] = f"v{i}"
    return chain


def spec_ops(specs: list[OpSpec]) -> list[ChainOp]:
    return [ChainOp(s.op, list(s.args["operands"]), dict(s.args["params"]), s.node) for s in specs]
