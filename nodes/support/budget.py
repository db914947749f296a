"""Charge each node's wall time to the run's budget."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., dict[str, Any]])


def charged(node: F) -> F:
    """Add the node's duration to `spent_s`, which the routers compare with `Context.wall_time_s`,
    and to `node_seconds[name]` (the report's time split, the eval's per-problem breakdown), beside
    any part of it the node reported itself (`node_seconds["profiler_wait"]`)."""

    @functools.wraps(node)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        start = time.monotonic()
        update = node(*args, **kwargs)
        seconds = time.monotonic() - start
        update["spent_s"] = update.get("spent_s", 0.0) + seconds
        update["node_seconds"] = {**update.get("node_seconds", {}), node.__name__: round(seconds, 3)}
        return update

    return wrapper  # type: ignore[return-value]
