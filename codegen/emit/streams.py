"""The forward's statements placed on streams: `with` blocks, waits and the final join.

Why a module of its own: the placement is planned from the data flow (codegen/schedule/streams.py);
writing it out is the same for every group kind. The program's `_StitchStreams` (runtime.py) holds
the side streams, one set per device, reused by every call and capture, and does nothing when the
inputs are not on a GPU.
"""

from __future__ import annotations

from codegen.frontend.source import indent
from codegen.schedule.streams import StreamPlan


def on_streams(statements: list[list[str]], plan: StreamPlan, inputs: list[str]) -> list[str]:
    """Each step's statements on its stream, after its waits; every side stream joined at the end."""
    like = next(iter(inputs), "None")
    body = [f"_ss = _StitchStreams({like}, {plan.streams})  # independent branches on side streams"]
    current = 0  # the stream of the open `with` block (0: none open)
    for lines, stream, waits in zip(statements, plan.stream, plan.waits, strict=True):
        if waits or (stream is not None and stream != current):
            current = 0  # a wait or another stream closes the block
        body += [f"_ss.wait({waiter}, {waited})" for waiter, waited in waits]
        if stream is None and current:  # a view inside a side-stream run stays in its block
            body += [indent(line, 4) for line in lines]
        elif not stream:
            body += lines
        else:
            if stream != current:
                body.append(f"with _ss.on({stream}):")
                current = stream
            body += [indent(line, 4) for line in lines]
    body.append("_ss.join()")
    return body
