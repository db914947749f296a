"""The `[launch]` suggestion: how a tuned launch table travels from the profile node to a coder.

Why its own module: the profile node writes it (nodes.support.tuning) and the offline coder reads it
(codegen.advice), and neither imports the other. The suggestion is a tag, the table as JSON, then
prose for an LLM coder: `[launch] {"g3": {"threads": 512}} set these launch knobs ...`.
"""

from __future__ import annotations

import json
from typing import Any

from graph.artifacts import Feedback

LAUNCH_TAG = "[launch]"


def parse_launch(raw: Any) -> dict[str, dict[str, int]]:
    """A launch table (group -> knob -> int) from JSON-like data; malformed entries are dropped."""
    table: dict[str, dict[str, int]] = {}
    if not isinstance(raw, dict):
        return table
    for group, knobs in raw.items():
        if isinstance(knobs, dict):
            clean = {
                str(k): int(v) for k, v in knobs.items() if isinstance(v, int) and not isinstance(v, bool)
            }
            if clean:
                table[str(group)] = clean
    return table


def merge_launch(
    base: dict[str, dict[str, int]], over: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    """`base` with `over`'s knobs written over it (a new table; neither argument changes)."""
    merged = {group: dict(knobs) for group, knobs in base.items()}
    for group, knobs in over.items():
        merged.setdefault(group, {}).update(knobs)
    return merged


def launch_suggestion(launch: dict[str, dict[str, int]], speedup: float | None) -> str:
    """The tagged suggestion that hands a tuned launch table to the coder."""
    gain = f"{speedup:.3f}x" if speedup is not None else "faster"
    return (
        f"{LAUNCH_TAG} {json.dumps(launch, sort_keys=True)} set these launch knobs in STITCH_LAUNCH "
        f"(measured on the GPU against the current table, side by side: {gain})"
    )


def launch_from(feedback: Feedback) -> dict[str, dict[str, int]]:
    """The launch table a `[launch]` suggestion carries ({} when there is none)."""
    for text in feedback.suggestions:
        if text.startswith(LAUNCH_TAG):
            try:
                raw, _ = json.JSONDecoder().raw_decode(text[len(LAUNCH_TAG) :].lstrip())
            except ValueError:
                continue
            return parse_launch(raw)
    return {}
