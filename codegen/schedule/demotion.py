"""Demotion: the planned fusion groups at the levels `fix` set, as the steps the emitter writes.

Why a module of its own: planning (schedule/fusion.py) decides what a group is; this decides what a
failing group becomes. Level 0 is the group as planned, 1 `split` (the same ops as separate kernels:
a library call without fused epilogue plus one epilogue kernel, one kernel per elementwise op, a row
op's prologue and epilogue as kernels of their own), 2 `reference` (the group's ops stay PyTorch).
A conv whose bias moved into its reader's prologue gets it back when either group is demoted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch.fx as fx

from codegen.frontend.ops import BATCH_NORM, CONV, COPY, ELEMENTWISE, GEMM, OTHER, VIEW, Classifier, OpSpec
from codegen.schedule.conv import conv_has_split_form
from codegen.schedule.fusion import LIBRARY_FAMILIES, REFERENCE, Group, Step, gemm_folds


def has_split_form(classifier: Classifier, group: Group) -> bool:
    """Does demotion level 1 produce different code from level 0 for this group?"""
    if group.kind == ELEMENTWISE:
        return len(group.epilogue) > 1
    if group.kind == GEMM:
        assert group.anchor is not None
        return gemm_folds(classifier, group).count > 0 or group.anchor.args.get("bias") is not None
    if group.kind == CONV:
        return conv_has_split_form(classifier, group)
    if group.kind == BATCH_NORM and group.lead:  # the concatenation it reads becomes a kernel again
        return True
    return bool(group.prologue or group.epilogue)


def _kept_bias_moves(steps: list[Step], levels: dict[str, int]) -> set[fx.Node]:
    """The convs whose bias moves into their reader's prologue at these levels: both as planned."""
    conv_level = {
        s.group.anchor.node: levels.get(s.group.id, 0)
        for s in steps
        if s.group is not None and s.group.bias_moved and s.group.anchor is not None
    }
    return {
        s.group.prologue_bias.node
        for s in steps
        if s.group is not None
        and s.group.prologue_bias is not None
        and levels.get(s.group.id, 0) == 0
        and conv_level.get(s.group.prologue_bias.node, 1) == 0
    }


def _with_bias_moves(group: Group, kept: set[fx.Node]) -> Group:
    """`group` with a bias move undone when the other group of the pair is demoted."""
    if group.bias_moved and group.anchor is not None and group.anchor.node not in kept:
        return replace(group, bias_moved=False)
    if group.prologue_bias is not None and group.prologue_bias.node not in kept:
        return replace(group, prologue_bias=None)
    return group


def realize(steps: list[Step], levels: dict[str, int]) -> list[Step]:
    """Apply demotion levels (by base group id) to the planned steps."""
    out: list[Step] = []
    kept = _kept_bias_moves(steps, levels)
    for step in steps:
        group = step.group
        if group is not None:
            step = Step(group=_with_bias_moves(group, kept))
            group = step.group
        if group is None or not group.covered:
            out.append(step)
            continue
        level = levels.get(group.id, 0)
        if level <= 0:
            out.append(step)
        elif level >= 2:
            # The absorbed getitems right after their anchor: the epilogue reads them.
            head = group.prologue + group.lead + ([group.anchor] if group.anchor else [])
            for i, spec in enumerate(group.specs):
                for node in spec.args.get("lead", ()) if spec.family == ELEMENTWISE else ():
                    # a comparison a masked fill absorbed (frontend/mask_ops.py) is computed again
                    ref = Group(
                        id=group.id, kind=REFERENCE, epilogue=[OpSpec(node, "compare", OTHER, "")], level=2
                    )
                    ref.outputs = [node]
                    out.append(Step(group=ref))
                ref = Group(id=group.id, kind=REFERENCE, epilogue=[spec], level=2, reason="demoted by fix")
                ref.outputs = [spec.node]
                out.append(Step(group=ref))
                if i == len(head) - 1:
                    out.extend(Step(spec=_view_spec(node)) for node in group.absorbed)
            if not head:
                out.extend(Step(spec=_view_spec(node)) for node in group.absorbed)
        else:
            out.extend(Step(group=g) for g in _split(group))
    return out


def _view_spec(node: fx.Node) -> OpSpec:
    return OpSpec(node, "view", VIEW, "getitem")


def _split(group: Group) -> list[Group]:
    """Level 1: the same ops as separate kernels."""
    pieces: list[Group] = []

    def piece(kind: str, part: str, **kw: Any) -> Group:
        g = Group(id=f"{group.id}.{len(pieces) + 1}", kind=kind, level=1, split_part=part, **kw)
        pieces.append(g)
        return g

    if group.kind == ELEMENTWISE:
        for spec in group.epilogue:
            piece(ELEMENTWISE, "op", epilogue=[spec])
    else:
        for spec in group.prologue:
            piece(ELEMENTWISE, "prologue", epilogue=[spec])
        lead = list(group.lead)
        if group.kind == BATCH_NORM and lead:  # the concatenation as its own copy kernel
            piece(COPY, "lead", anchor=lead[0])
            lead = []
        anchor_piece = piece(
            group.kind,
            "anchor",
            anchor=group.anchor,
            absorbed=list(group.absorbed),
            lead=lead,
            trail=list(group.trail),
        )
        if group.kind in LIBRARY_FAMILIES:
            anchor_piece.epilogue = list(group.epilogue)  # the plain library call + one epilogue kernel
        else:
            for spec in group.epilogue:
                piece(ELEMENTWISE, "epilogue", epilogue=[spec])
    if len(pieces) == 1:
        pieces[0].id = group.id
    for g in pieces:
        members = set(g.members)
        g.outputs = [n for n in g.members if any(u not in members for u in n.users)]
        if g.tail not in g.outputs:
            g.outputs.append(g.tail)
    return pieces
