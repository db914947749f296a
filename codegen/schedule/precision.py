"""Which groups must compute exactly as the reference does when cuDNN may use TF32.

Why: under PyTorch's default (`torch.backends.cudnn.allow_tf32 = True`, which KernelBench keeps)
the reference's convolutions round their inputs to TF32. A value that differs by one ulp before
such a convolution can round the other way, and through a deep CNN that grows past KernelBench's
1e-4 tolerance (measured on an H200: a one-ulp input change moves MobileNetV2's TF32 output by
0.01; docs/kernelbench.md §5). So while TF32 is allowed, every group that is, or feeds, a
convolution runs as the reference's own PyTorch call (the same cuDNN algorithm, bit for bit), and
only what follows the last convolution stays ours. With TF32 off (the strict harness) rounding
differences stay at the fp32 level and the fast path applies.

Depthwise 1-D/2-D convolutions are no TF32 ops: PyTorch runs them with its own fp32 kernel whatever
the flag, and ours (the conv library's depthwise kernel, the only one it runs for them with TF32
allowed) sums in that kernel's order. So they stay ours where nothing after them is a TF32 op; one
that feeds a later convolution is still matched, as any feeding group is.
"""

from __future__ import annotations

from torch import fx

from codegen.frontend.conv_ops import CONV_OPS
from codegen.frontend.ops import OpSpec
from codegen.frontend.rnn_ops import RNN_OPS
from codegen.schedule.fusion import REFERENCE, Step

# Ops whose PyTorch implementation runs through cuDNN and honours cudnn.allow_tf32: the convolutions
# and the recurrent layers (PyTorch's cuDNN RNN permits TF32 under the same flag).
TF32_OPS = CONV_OPS | RNN_OPS


def _step_specs(step: Step) -> list[OpSpec]:
    if step.group is not None:
        return list(step.group.specs)
    return [step.spec] if step.spec is not None else []


def rounds_to_tf32(spec: OpSpec) -> bool:
    """Whether the reference's call of this op rounds to TF32 when cuDNN may (not a depthwise conv)."""
    return spec.op in TF32_OPS and not (spec.args or {}).get("depthwise", False)


def tf32_feeding_nodes(steps: list[Step]) -> set[fx.Node]:
    """The TF32 ops and every node whose value reaches one of them."""
    roots = [spec.node for step in steps for spec in _step_specs(step) if rounds_to_tf32(spec)]
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
