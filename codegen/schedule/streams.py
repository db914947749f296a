"""Independent branches of a captured forward on separate CUDA streams (issue 18, point 3).

Why: a launch-bound model with branches (an Inception block's four towers, a residual block's
downsample path) runs each branch's small kernels one after another on one stream, leaving most of
the GPU idle. Inside a CUDA graph, work on forked streams becomes parallel branches of the graph.

How the forward's steps are placed, in their order:
- a step continues the chain of its most recently produced operand, on that operand's stream, if
  no other step has continued it yet; otherwise it starts a new side stream (at most
  MAX_STREAMS in all, then it stays on the operand's stream);
- before a step reads a value made on another stream, its stream waits for that stream (a
  `wait_stream`: everything issued there so far), once per value not yet covered;
- views, size queries and attributes launch nothing: they take the stream of what they view;
- the forward's inputs count as made on the main stream before the first step, and every side
  stream is joined back into the main stream before the forward returns.
Memory stays safe without `record_stream`: every value the forward names lives until it returns,
after the join, and a helper's temporaries are used only on the stream that made them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.fx as fx

from codegen.frontend.ops import ATTR, OUTPUT, SCALAR, VIEW
from codegen.schedule.fusion import Step

MAX_STREAMS = 4  # the main stream and three side streams


@dataclass
class StreamStep:
    """One statement of the forward: the values it makes and reads, and whether it launches work."""

    defs: list[fx.Node]
    uses: list[fx.Node]
    launches: bool


@dataclass
class StreamPlan:
    stream: list[int | None] = field(default_factory=list)  # per step: its stream (None: launches nothing)
    waits: list[list[tuple[int, int]]] = field(default_factory=list)  # per step: (waiter, waited) first
    streams: int = 1  # streams used, the main one included

    @property
    def parallel(self) -> bool:
        return self.streams > 1


def step_of(step: Step) -> StreamStep | None:
    """What one planned step makes and reads (None: the forward writes nothing for it)."""
    group = step.group
    if group is None:
        assert step.spec is not None
        family, node = step.spec.family, step.spec.node
        if family == OUTPUT or (family in (VIEW, SCALAR, ATTR) and not node.users):
            return None
        return StreamStep([node], node.all_input_nodes, family not in (VIEW, SCALAR, ATTR))
    members = set(group.members)
    uses = list(dict.fromkeys(n for m in group.members for n in m.all_input_nodes if n not in members))
    return StreamStep(list(group.outputs) or list(group.members), uses, True)


def branch_streams(steps: list[Step], inputs: list[fx.Node]) -> int:
    """How many streams the forward's independent branches could use (1: it is one chain)."""
    placed = [s for s in (step_of(step) for step in steps) if s is not None]
    return plan_streams(placed, inputs).streams


def plan_streams(steps: list[StreamStep], inputs: list[fx.Node], limit: int = MAX_STREAMS) -> StreamPlan:
    """Place every step on a stream (module docstring)."""
    home: dict[fx.Node, int] = {n: 0 for n in inputs}  # the stream whose work made a value's data
    made: dict[fx.Node, int] = {n: -1 for n in inputs}  # the step that made it (-1: before the forward)
    root: dict[fx.Node, fx.Node] = {n: n for n in inputs}  # a view's data: the value it views
    continued: set[fx.Node] = set()
    last: dict[int, int] = {0: -1}  # the last step issued on each stream
    covered: dict[tuple[int, int], int] = {}  # (waiter, waited) -> last step of `waited` waited for
    plan = StreamPlan()
    for index, step in enumerate(steps):
        known = [n for n in step.uses if n in home]
        if not step.launches:
            source = max(known, key=lambda n: made[n]) if known else None
            for node in step.defs:
                home[node] = home[source] if source is not None else 0
                made[node] = made[source] if source is not None else -1
                root[node] = root[source] if source is not None else node
            plan.stream.append(None)
            plan.waits.append([])
            continue
        primary = max(known, key=lambda n: made[n]) if known else None
        if primary is None:
            stream = 0
        elif root[primary] not in continued:
            stream = home[primary]
            continued.add(root[primary])
        elif len(last) < limit:
            stream = len(last)
        else:
            stream = home[primary]
        waits: list[tuple[int, int]] = []
        for node in known:
            other = home[node]
            if other != stream and made[node] > covered.get((stream, other), -2):
                waits.append((stream, other))
                covered[(stream, other)] = last.get(other, -1)
        last[stream] = index
        for node in step.defs:
            home[node], made[node], root[node] = stream, index, node
        plan.stream.append(stream)
        plan.waits.append(list(dict.fromkeys(waits)))
    plan.streams = len(last)
    return plan
