"""Group classified ops into fusion groups (their demotion when they fail: schedule/demotion.py).

A group becomes one kernel (or one cuBLASLt call plus at most one epilogue kernel):
- elementwise: a run of elementwise ops of one output shape (other operands broadcast into it);
- gemm: linear / matmul / bmm / addmm with the elementwise ops that follow it (epilogue);
- softmax / layer_norm / reduction / axis (arg-reductions, logsumexp, softmax over a non-last
  dim): the row op, an elementwise prologue feeding it, and an elementwise epilogue after it;
- batch_norm: training-mode BatchNorm2d (batch statistics) with its elementwise epilogue;
- conv: a convolution of any kind (cuDNN) with the elementwise ops after it (schedule/conv.py);
- pool / group_norm: our pooling kernel or group/instance-norm statistics, with an elementwise
  prologue on load and epilogue fused; a conv whose epilogue would be a pass of its own hands it,
  bias included, to such a reader (or a row op) instead.
Everything else stays PyTorch ('reference').

Nodes are first re-scheduled so that an elementwise consumer directly follows its producer when the
graph allows it (a pure topological re-ordering), then grouped greedily in that order. Cheap
metadata nodes (views, size arithmetic) that do not depend on an open group are emitted before it,
so that `x * s + bias.view(1, -1, 1, 1)` still fuses.

Demotion levels (what `fix` does to a group that fails): 0 as planned, 1 split, 2 reference
(schedule/demotion.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from codegen.frontend.ops import (
    ATTENTION,
    ATTR,
    AXIS,
    BATCH_NORM,
    CONV,
    COPY,
    ELEMENTWISE,
    GEMM,
    INPUT,
    LAYER_NORM,
    NORM,
    OTHER,
    OUTPUT,
    POOL,
    REDUCTION,
    RNN,
    SCALAR,
    SCAN,
    SOFTMAX,
    VIEW,
    Classifier,
    OpSpec,
)
from codegen.schedule.conv import conv_folds

ROW_FAMILIES = (SOFTMAX, LAYER_NORM, REDUCTION, SCAN, AXIS)
PROLOGUE_FAMILIES = (*ROW_FAMILIES, POOL, NORM)  # kernels that apply an elementwise chain on load
ANCHOR_FAMILIES = (GEMM, BATCH_NORM, CONV, POOL, NORM, RNN, ATTENTION, COPY) + ROW_FAMILIES
LIBRARY_FAMILIES = (GEMM, CONV)  # a library call plus one epilogue kernel when split
MAX_TENSOR_OPERANDS = 8
REFERENCE = "reference"
LEVEL_NAMES = {0: "fused", 1: "split", 2: "reference"}
# Complexity rank used to pick the group to demote when a failure cannot be located.
COMPLEXITY = {
    GEMM: 5,
    CONV: 5,
    RNN: 5,
    ATTENTION: 5,
    BATCH_NORM: 4,
    LAYER_NORM: 3,
    SOFTMAX: 3,
    SCAN: 3,
    REDUCTION: 2,
    AXIS: 2,
    POOL: 2,
    COPY: 1,
    NORM: 4,
    ELEMENTWISE: 1,
    REFERENCE: 0,
}


@dataclass
class Group:
    """Ops that become one kernel (or a library call with its epilogue)."""

    id: str
    kind: str
    anchor: OpSpec | None = None
    prologue: list[OpSpec] = field(default_factory=list)
    epilogue: list[OpSpec] = field(default_factory=list)  # for elementwise groups: the whole chain
    lead: list[OpSpec] = field(default_factory=list)  # non-elementwise ops the anchor's kernel does on load
    trail: list[OpSpec] = field(
        default_factory=list
    )  # ... and on store (a scan's flips, frontend/scan_ops.py)
    absorbed: list[fx.Node] = field(default_factory=list)  # e.g. getitem(max(x, dim), 0)
    outputs: list[fx.Node] = field(default_factory=list)
    save_prologue: bool = False
    # A conv whose whole epilogue became its reader's prologue leaves its bias to that prologue too
    # (`bias_moved` on the conv group, `prologue_bias` the conv on the reader), so the conv output is
    # read once, by the reader, after cuDNN wrote it; demotion.realize() undoes the move when either
    # group is demoted.
    bias_moved: bool = False
    prologue_bias: OpSpec | None = None
    reason: str = ""
    level: int = 0
    split_part: str = ""  # for the pieces of a split group: 'prologue', 'anchor', 'epilogue', 'op'

    @property
    def specs(self) -> list[OpSpec]:
        return self.prologue + self.lead + ([self.anchor] if self.anchor else []) + self.trail + self.epilogue

    @property
    def members(self) -> list[fx.Node]:
        return [s.node for s in self.specs] + list(self.absorbed)

    @property
    def covered(self) -> bool:
        return self.kind != REFERENCE

    @property
    def tail(self) -> fx.Node:
        """The node whose value is the group's main result."""
        if self.epilogue:
            return self.epilogue[-1].node
        if self.trail:
            return self.trail[-1].node
        if self.absorbed:
            return self.absorbed[-1]
        if self.anchor is not None:
            return self.anchor.node
        return self.prologue[-1].node

    @property
    def base_id(self) -> str:
        return self.id.split(".")[0]


@dataclass
class Step:
    """One item of the generated forward: a group, or a single node kept as PyTorch."""

    group: Group | None = None
    spec: OpSpec | None = None


@dataclass
class GemmFold:
    """Epilogue ops that cuBLASLt applies itself: alpha, bias, residual (beta=1 C), relu."""

    count: int = 0
    alpha: list[tuple[str, Any]] = field(default_factory=list)
    bias: Any = None
    residual: Any = None
    relu: bool = False


def _shape(classifier: Classifier, ref: Any) -> tuple[int, ...] | None:
    value = classifier.value(ref)
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def _is_scalar_operand(classifier: Classifier, ref: Any) -> bool:
    if isinstance(ref, fx.Node):
        value = classifier.value(ref)
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(ref, (int, float)) and not isinstance(ref, bool)


def tensor_operands(classifier: Classifier, spec: OpSpec) -> list[Any]:
    return [o for o in spec.args.get("operands", []) if isinstance(classifier.value(o), torch.Tensor)]


def gemm_folds(classifier: Classifier, group: Group) -> GemmFold:
    """How many leading epilogue ops of a gemm group cuBLASLt can apply exactly."""
    fold = GemmFold()
    anchor = group.anchor
    if anchor is None or group.level > 0:
        return fold
    out_shape = _shape(classifier, anchor.node)
    has_bias = anchor.args.get("bias") is not None
    two_d = (
        "weight" in anchor.args
        or _shape(classifier, anchor.args.get("b")) is not None
        and len(_shape(classifier, anchor.args.get("b")) or ()) == 2
    )
    tail = anchor.node
    for spec in group.epilogue:
        if len(tail.users) != 1 or spec.family != ELEMENTWISE:
            break
        operands = spec.args["operands"]
        others = [o for o in operands if o is not tail]
        if len(operands) != 2 or len(others) != 1 or tail not in operands:
            if spec.op == "relu" and operands and operands[0] is tail and not fold.relu:
                fold.relu = True
                fold.count += 1
            break
        other = others[0]
        first = operands[0] is tail
        plain = spec.args["params"].get("alpha", 1) == 1
        if (
            spec.op in ("mul", "div")
            and _is_scalar_operand(classifier, other)
            and (spec.op == "mul" or first)
        ):
            if has_bias or fold.bias is not None or fold.residual is not None:
                break
            fold.alpha.append((spec.op, other))
        elif spec.op == "add" and plain and isinstance(classifier.value(other), torch.Tensor):
            shape = _shape(classifier, other)
            n = out_shape[-1] if out_shape else -1
            is_row = (
                shape is not None and len(shape) >= 1 and shape[-1] == n and all(s == 1 for s in shape[:-1])
            )
            if is_row and two_d and not has_bias and fold.bias is None:
                fold.bias = other
            elif shape == out_shape and fold.residual is None and classifier.is_f32(other):
                fold.residual = other
            else:
                break
        else:
            break
        fold.count += 1
        tail = spec.node
    return fold


class FusionPlanner:
    """Schedules and groups the classified ops of one traced model."""

    def __init__(self, classifier: Classifier, specs: list[OpSpec]) -> None:
        self.classifier = classifier
        self.specs = specs
        self.by_node = {s.node: s for s in specs}
        self.order = {s.node: i for i, s in enumerate(specs)}

    # ---- scheduling -----------------------------------------------------------------------------
    def _inplace_unsafe(self) -> bool:
        """Re-ordering is only safe when every in-place op became an out-of-place elementwise op."""
        return any(self.classifier.is_inplace_node(s.node) and s.family != ELEMENTWISE for s in self.specs)

    def _pullable(self, spec: OpSpec, producer: fx.Node) -> bool:
        """Elementwise and metadata consumers follow their producer; so does a row op fed by an
        elementwise chain, so that the chain becomes its prologue even when other inputs' chains
        come first in the reference's order."""
        if self.classifier.is_inplace_node(spec.node):
            return False
        if spec.family in (ELEMENTWISE, VIEW, SCALAR):
            return True
        return (
            spec.family in PROLOGUE_FAMILIES
            and spec.args.get("input") is producer
            and self.by_node[producer].family == ELEMENTWISE
        )

    def schedule(self) -> list[OpSpec]:
        """Topological re-order that puts each elementwise consumer right after its producer."""
        if self._inplace_unsafe():
            return list(self.specs)
        placed: set[fx.Node] = set()
        out: list[OpSpec] = []
        for spec in self.specs:
            if spec.node in placed:
                continue
            out.append(spec)
            placed.add(spec.node)
            current = spec.node
            while True:
                candidates = [
                    u
                    for u in current.users
                    if u not in placed
                    and u in self.by_node
                    and self._pullable(self.by_node[u], current)
                    and all(i in placed for i in u.all_input_nodes)
                ]
                if not candidates:
                    break
                nxt = min(candidates, key=lambda n: self.order[n])
                out.append(self.by_node[nxt])
                placed.add(nxt)
                current = nxt
        return out

    # ---- grouping --------------------------------------------------------------------------------
    def build(self) -> list[Step]:
        steps: list[Step] = []
        open_group: Group | None = None
        # Nodes an anchor's kernel performs itself (frontend/scan_ops.py) are never steps of their own.
        absorbed = {n for s in self.specs for n in (*s.args.get("lead", ()), *s.args.get("trail", ()))}

        def close() -> None:
            nonlocal open_group
            if open_group is not None:
                self._finish(open_group)
                steps.append(Step(group=open_group))
                open_group = None

        for spec in self.schedule():
            if spec.node in absorbed or spec.family == INPUT:
                continue
            if spec.family == OUTPUT:
                close()
                steps.append(Step(spec=spec))
                continue
            if open_group is not None:
                if self._can_extend(open_group, spec):
                    open_group.epilogue.append(spec)
                    continue
                merged = self._take_as_prologue(open_group, spec, steps)
                if merged is not None:
                    open_group = merged
                    absorbed.update(merged.absorbed)
                    continue
                if spec.family in (VIEW, SCALAR, ATTR) and not self._depends_on(spec, open_group):
                    steps.append(Step(spec=spec))
                    continue
                close()
            group = self._start(spec)
            if group is None:
                steps.append(Step(spec=spec))
            else:
                open_group = group
                absorbed.update(group.absorbed)
        close()
        self._number(steps)
        return steps

    def _depends_on(self, spec: OpSpec, group: Group) -> bool:
        members = set(group.members)
        return any(n in members for n in spec.node.all_input_nodes)

    def _start(self, spec: OpSpec) -> Group | None:
        if spec.family == ELEMENTWISE:
            if len(tensor_operands(self.classifier, spec)) > MAX_TENSOR_OPERANDS:
                return None
            return Group(id="", kind=ELEMENTWISE, epilogue=[spec])
        if spec.family in ANCHOR_FAMILIES:
            return self._wrap(Group(id="", kind=spec.family, anchor=spec))
        return None

    def _can_extend(self, group: Group, spec: OpSpec) -> bool:
        if spec.family != ELEMENTWISE or group.kind in (REFERENCE, ATTENTION):
            return False  # the attention kernel takes no epilogue yet
        tail = group.tail
        if _shape(self.classifier, spec.node) != _shape(self.classifier, tail):
            return False
        members = set(group.members)
        operand_nodes = [o for o in spec.args["operands"] if isinstance(o, fx.Node)]
        inside = [o for o in operand_nodes if o in members]
        if not inside and not self._side_op(group, operand_nodes):
            return False
        if group.kind in (*ROW_FAMILIES, POOL, COPY) and (
            len(tail.users) != 1 or any(o is not tail for o in inside)
        ):
            return False
        count = len({id(o) for o in self._group_tensor_operands(group)} | {id(o) for o in operand_nodes})
        return count <= MAX_TENSOR_OPERANDS

    def _side_op(self, group: Group, operand_nodes: list[fx.Node]) -> bool:
        """An elementwise op of the group's shape that reads only forward inputs and parameters
        (`xlogy(t, t)` beside `t * log(p)` in a KL divergence) joins an elementwise group: its operands
        exist wherever the group's kernel runs, and the ops after it may then use it in registers."""
        if group.kind != ELEMENTWISE or not operand_nodes:
            return False
        families = [self.by_node[o].family if o in self.by_node else None for o in operand_nodes]
        return all(f in (INPUT, ATTR) for f in families)

    def _group_tensor_operands(self, group: Group) -> list[Any]:
        members = set(group.members)
        return [o for s in group.specs for o in tensor_operands(self.classifier, s) if o not in members]

    def _take_as_prologue(self, group: Group, spec: OpSpec, steps: list[Step]) -> Group | None:
        """Fold the open elementwise chain (or a gemm's or conv's trailing epilogue) into a row op's
        or a pool's loads, or a channel concatenation into the batch norm that is its only reader."""
        if spec.family == BATCH_NORM:
            return _batch_norm_of_concat(group, spec)
        if spec.family not in PROLOGUE_FAMILIES or spec.args.get("input") is not group.tail:
            return None
        if _shape(self.classifier, group.tail) != _shape(self.classifier, spec.args["input"]):
            return None
        if group.kind == ELEMENTWISE:
            chain = group.epilogue
            members = set(group.members)
            for s in chain[:-1]:
                if any(u not in members for u in s.node.users):
                    return None
            merged = Group(id="", kind=spec.family, anchor=spec, prologue=list(chain))
            merged.save_prologue = any(u is not spec.node for u in group.tail.users)
            if merged.save_prologue and spec.family in (REDUCTION, POOL, NORM):
                return None  # these kernels cannot store the prologue's result: a kernel of its own
        elif group.kind == GEMM and len(group.tail.users) == 1:
            fold = gemm_folds(self.classifier, group)
            kept, stolen = group.epilogue[: fold.count], group.epilogue[fold.count :]
            if not stolen:
                return None
            anchor = group.anchor
            assert anchor is not None
            source = kept[-1].node if kept else anchor.node
            gemm_nodes = {anchor.node} | {s.node for s in kept}
            stolen_nodes = {s.node for s in stolen}
            for s in stolen:
                if any(n in gemm_nodes and n is not source for n in s.node.all_input_nodes):
                    return None
                if s is not stolen[-1] and any(u not in stolen_nodes for u in s.node.users):
                    return None
            group.epilogue = kept
            self._finish(group)
            steps.append(Step(group=group))
            merged = Group(id="", kind=spec.family, anchor=spec, prologue=list(stolen))
        elif group.kind == CONV and group.epilogue and len(group.tail.users) == 1:
            taken = self._take_conv_epilogue(group, spec, steps)
            if taken is None:
                return None
            merged = taken
        else:
            return None
        return self._wrap(merged)

    def _take_conv_epilogue(self, group: Group, spec: OpSpec, steps: list[Step]) -> Group | None:
        """A conv whose epilogue is a pass of its own (schedule/conv.py: more than the launcher's bias,
        residual and ReLU) gives that whole epilogue, and its bias, to the reader's loads."""
        if conv_folds(self.classifier, group).rest == 0:
            return None
        anchor = group.anchor
        assert anchor is not None
        stolen = group.epilogue
        nodes = {anchor.node} | {s.node for s in stolen}
        for node in (anchor.node, *(s.node for s in stolen[:-1])):
            if any(u not in nodes for u in node.users):
                return None  # read elsewhere too: that reader needs it written (and with its bias)
        group.epilogue = []
        group.bias_moved = anchor.args.get("bias") is not None
        self._finish(group)
        steps.append(Step(group=group))
        merged = Group(id="", kind=spec.family, anchor=spec, prologue=list(stolen))
        merged.prologue_bias = anchor if group.bias_moved else None
        return merged

    def _wrap(self, group: Group) -> Group:
        """Give an anchor group the nodes its kernel absorbs (max's indices getitem, a scan's flips)."""
        spec = group.anchor
        assert spec is not None
        if spec.family == REDUCTION and spec.args.get("with_indices"):
            group.absorbed = [next(iter(spec.node.users))]
        if spec.family == AXIS:  # a max/min tuple's getitems, values last (frontend/axis_ops.py)
            group.absorbed = list(spec.args.get("absorbed", ()))
        group.lead = [self.by_node[n] for n in spec.args.get("lead", ())]
        group.trail = [self.by_node[n] for n in spec.args.get("trail", ())]
        return group

    def _finish(self, group: Group) -> None:
        members = set(group.members)
        outputs = [n for n in group.members if any(u not in members for u in n.users)]
        if group.kind in ROW_FAMILIES:
            # The kernel writes the tail, the prologue's result and the getitems it absorbed (an
            # AXIS group's indices next to its values); other members live in registers only.
            outputs = [
                n
                for n in outputs
                if n is group.tail or n in group.absorbed or (group.prologue and n is group.prologue[-1].node)
            ]
        if group.tail not in outputs:
            outputs.append(group.tail)
        group.outputs = outputs

    def _number(self, steps: list[Step]) -> None:
        count = 0
        for step in steps:
            if step.group is not None:
                count += 1
                step.group.id = f"g{count}"
            elif step.spec is not None and step.spec.family == OTHER:
                count += 1
                group = Group(id=f"g{count}", kind=REFERENCE, epilogue=[step.spec], reason=step.spec.reason)
                group.outputs = [step.spec.node]
                step.group, step.spec = group, None


def _batch_norm_of_concat(group: Group, spec: OpSpec) -> Group | None:
    """BatchNorm over `torch.cat(parts, 1)` read by nothing else (a DenseNet layer's input): the cat
    becomes the group's lead. Per-channel statistics come from the parts themselves, and the
    normalisation is the concatenation's store epilogue, so the joined tensor is never written
    (codegen/emit/norm_concat.py)."""
    cat = group.anchor
    if (
        group.kind != COPY
        or cat is None
        or group.epilogue
        or cat.args.get("mode") != "cat"
        or cat.args.get("dim") != 1
        or spec.args.get("input") is not cat.node
        or len(cat.node.users) != 1
    ):
        return None
    return Group(id="", kind=BATCH_NORM, anchor=spec, lead=[cat])


def pool_template(group: Group) -> str:
    """The plan's and the program's name for a pool group's kernel."""
    anchor = group.anchor
    assert anchor is not None
    name = f"pool_{anchor.args['params'].kind}"
    return name + ("+prologue" if group.prologue else "") + ("+epilogue" if group.epilogue else "")


def group_norm_fused(group: Group) -> bool:
    """Whether a group-norm group's one output is the norm (through its epilogue), which one launcher call
    writes (codegen/emit/norm.py), rather than the normalised value being an output as well."""
    anchor = group.anchor
    assert anchor is not None
    result = group.epilogue[-1].node if group.epilogue else anchor.node
    return list(group.outputs) == [result]


def group_norm_template(group: Group) -> str:
    """The plan's and the program's name for a group-norm group's kernels."""
    name = "gn_fused" if group_norm_fused(group) else "gn_stats+ew"
    return name + ("_prologue" if group.prologue else "") + ("_epilogue" if group.epilogue else "")
