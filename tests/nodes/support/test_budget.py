"""A node's wall time charged to the run (nodes/support/budget.py)."""

from __future__ import annotations

import time
from typing import Any

from nodes.support.budget import charged


@charged
def profiler(state: dict[str, Any]) -> dict[str, Any]:
    time.sleep(0.02)
    return {"node_seconds": {"profiler_wait": 0.01}, "log": ["done"]}


def test_a_node_is_charged_its_time_beside_the_parts_it_reported() -> None:
    update = profiler({})
    assert update["spent_s"] >= 0.02 and update["log"] == ["done"]
    assert update["node_seconds"]["profiler"] >= 0.02
    assert update["node_seconds"]["profiler_wait"] == 0.01  # kept, not overwritten
