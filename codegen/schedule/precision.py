"""Which groups must compute exactly as the reference does when cuDNN may use TF32.

Why: under PyTorch's default (`torch.backends.cudnn.allow_tf32 = True`, which KernelBench keeps)
the reference's convolutions round their inputs to TF32. A value that differs by one ulp before
such a convolution can round the other way, and through a deep CNN that grows past KernelBench's
1e-4 tolerance (measured on an H200: a one-ulp input change moves MobileNetV2's TF32 output by
0.01; docs/kernelbench.md §5). So while TF32 is allowed, every group that is, or feeds, a
convolution runs as the reference's own PyTorch call (the same cuDNN algorithm, bit for bit), and
only what follows the last convolution stays ours. With TF32 off (the strict harness) rounding
differences stay at the fp32 level and the fast path applies.
"""

from __future__ import annotations

from torch import fx

from codegen.frontend.conv_ops import CONV_OPS
from codegen.frontend.rnn_ops import RNN_OPS
from codegen.schedule.fusion import REFERENCE, Step

# Ops whose PyTorch implementation runs through cuDNN and honours cudnn.allow_tf32: the convolutions
# and the recurrent layers (PyTorch's cuDNN RNN permits TF32 under the same flag).
TF32_OPS = CONV_OPS | RNN_OPS


def _step_nodes(step: Step) -> list[fx.Node]:
    if step.group is not None:
        return [spec.node for spec in step.group.specs] + list(step.group.absorbed)
    return [step.spec.node] if step.spec is not None else []


def _step_ops(step: Step) -> list[str]:
    if step.group is not None:
        return [spec.op for spec in step.group.specs]
    return [step.spec.op] if step.spec is not None else []


def tf32_feeding_nodes(steps: list[Step]) -> set[fx.Node]:
    """The TF32 ops and every node whose value reaches one of them."""
    roots = [
        node
        for step in steps
        for node, op in zip(_step_nodes(step), _step_ops(step), strict=False)
        if op in TF32_OPS
    ]
    seen: set[fx.Node] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(node.all_input_nodes)
    return seen


def tf32_matched_levels(steps: list[Step], levels: dict[str, int]) -> dict[str, int] | None:
    """`levels` with every covered group that is or feeds a TF32 op demoted to PyTorch (level 2);
    None when the program has no such group (nothing changes when TF32 is on)."""
    feeding = tf32_feeding_nodes(steps)
    matched = dict(levels)
    changed = False
    for step in steps:
        group = step.group
        if group is None or group.kind == REFERENCE or not group.covered or levels.get(group.id, 0) >= 2:
            continue
        if any(spec.node in feeding for spec in group.specs):
            matched[group.id] = 2
            changed = True
    return matched if changed else None
