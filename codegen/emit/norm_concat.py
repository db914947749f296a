"""Code for a BatchNorm over a channel concatenation that nothing else reads (a DenseNet layer).

The statistics of channel c are those of whichever part holds it, so each part's channels are
summed where they lie, written at their channel offset (one statistics call per part). The
normalisation, with the group's elementwise epilogue, is then the concatenation kernel's store
epilogue: the parts are read once and the normalised result written once, and the joined tensor
is never materialised (two passes over it saved, plus the statistics pass reading it back).

When the group has to hand out more than its last value (the normalised tensor is also read by
something outside the group), the concatenation is written as before and the usual batch-norm
code runs on it.
"""

from __future__ import annotations

import torch.fx as fx

from codegen.emit.chain import ChainOp
from codegen.emit.kernels import GroupWriter, Helper, spec_ops
from codegen.emit.layout import copy_launches
from codegen.schedule.fusion import Group


def write_batch_norm_of_concat(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for a BATCH_NORM group whose lead is its input's `cat(parts, 1)`."""
    anchor, cat = group.anchor, group.lead[0]
    assert anchor is not None
    if group.outputs != [group.tail]:
        launches = copy_launches(writer, group, helper, cat, [], cat.node, scope="cat.")
        helper.locals[cat.node] = "y"
        plain = Group(
            id=group.id, kind=group.kind, anchor=anchor, epilogue=group.epilogue, outputs=group.outputs
        )
        template, more = writer.write_batch_norm(plain, helper)
        return "copy_cat+" + template, launches + more
    names: list[str] = []
    for i, part in enumerate(cat.args["inputs"]):
        name = f"p{i}"
        helper.lines.append(f"{name} = {helper.ref(part)}.contiguous()")
        if isinstance(part, fx.Node):  # the concatenation below reads the same contiguous tensor
            helper.locals[part] = name
        names.append(name)
    operands = writer.bn_statistics(group, helper, names)
    ops = [ChainOp("bn_affine", [cat.node, *operands], {}, anchor.node)] + spec_ops(group.epilogue)
    launches = copy_launches(writer, group, helper, cat, ops, group.tail)
    helper.returns = ["y"]
    return "bn_stats_parts+copy_cat_epilogue", len(names) + launches
