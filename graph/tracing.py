"""LangSmith for whole runs: the graph-level run config, and a client that cannot stall exit.

Tracing is on when `LANGSMITH_TRACING=true` (or the legacy `LANGCHAIN_TRACING_V2`); LangChain then
traces every graph run. `run_config` names the root run and gives it tags and metadata (problem,
policy, level, thread, experiment) that LangChain copies onto every child run, nodes and model calls
alike; the LLM policy adds role, iteration and mode to each model call (`nodes/llm/run_config.py`).

Why the client needs care: langsmith's defaults (10 s connect and 60 s read timeouts, three
urllib3 retries, non-daemon sender threads that keep uploading at interpreter exit) turn an
endpoint that accepts connections but never answers into minutes of exit stall, after the run
itself finished. `prepare_tracing` installs the process-wide client with short timeouts, one retry,
daemon sender threads and uncompressed uploads (the compressed path sends from a thread pool that
exit waits for); `flush_traces` then waits a bounded time for pending uploads. What is still unsent
then is dropped, or saved to `LANGSMITH_FAILED_TRACES_DIR` when its upload failed in time.
Everything here is a no-op when tracing is off, and importing this module imports no langsmith.
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langsmith import Client

    from graph.context import Context

log = logging.getLogger(__name__)

TRACING_VARIABLES = ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING")
ROOT_TAG = "stitchcuda"


def tracing_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when the environment turns LangSmith tracing on (langsmith's own rule: the value 'true')."""
    env = os.environ if environ is None else environ
    return any(env.get(name, "").strip().lower() == "true" for name in TRACING_VARIABLES)


def run_config(
    problem: str,
    *,
    policy: str,
    thread_id: str | None = None,
    level: str | None = None,
    context: Context | None = None,
    tags: Sequence[str] = (),
    experiment: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """RunnableConfig fields (run_name, tags, metadata) for one graph run of `problem`.

    Merge them into the config passed to `invoke`/`stream`; LangGraph keeps `configurable` and
    `recursion_limit` from the rest of the config.
    """
    run_tags = [ROOT_TAG, f"problem:{problem}", f"policy:{policy}"]
    meta: dict[str, Any] = {"problem": problem, "policy": policy}
    if level:
        run_tags.append(f"level:{level}")
        meta["level"] = level
    if experiment:
        run_tags.append(f"experiment:{experiment}")
        meta["experiment"] = experiment
    if thread_id:
        meta["thread_id"] = thread_id
    if context is not None:
        meta |= {
            "device": context.device,
            "gpu_arch": context.gpu_arch,
            "max_iterations": context.max_iterations,
            "hybrid_start": context.hybrid_start,
        }
    meta |= dict(metadata or {})
    run_tags += [t for t in tags if t and t not in run_tags]
    return {"run_name": f"stitchcuda:{problem}", "tags": run_tags, "metadata": meta}


@dataclass(frozen=True)
class TraceLimits:
    """How long LangSmith may hold a run or its exit, in seconds; env STITCHCUDA_LANGSMITH_*."""

    connect_s: float = 3.0
    read_s: float = 5.0
    retries: int = 1
    flush_s: float = 10.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TraceLimits:
        env = os.environ if environ is None else environ
        defaults = cls()

        def number(name: str, default: float) -> float:
            raw = env.get(f"STITCHCUDA_LANGSMITH_{name}", "").strip()
            try:
                return max(0.0, float(raw)) if raw else default
            except ValueError:
                log.warning("ignoring STITCHCUDA_LANGSMITH_%s=%r: not a number", name, raw)
                return default

        return cls(
            connect_s=number("CONNECT_S", defaults.connect_s),
            read_s=number("READ_S", defaults.read_s),
            retries=int(number("RETRIES", defaults.retries)),
            flush_s=number("FLUSH_S", defaults.flush_s),
        )


_prepared: dict[str, Any] = {}


def prepare_tracing(limits: TraceLimits | None = None) -> Client | None:
    """Install the bounded process-wide LangSmith client and flush it (bounded) at exit.

    Returns the client, or None when tracing is off. Call it before the first traced run: a client
    that langsmith already created keeps its own settings (it is still flushed at exit).
    """
    if not tracing_enabled():
        return None
    if "client" in _prepared:
        return _prepared["client"]
    limits = limits or TraceLimits.from_env()
    # Read by langsmith when it builds the client; a user's explicit setting wins.
    os.environ.setdefault("LANGSMITH_USE_DAEMON", "true")
    os.environ.setdefault("LANGSMITH_DISABLE_RUN_COMPRESSION", "true")
    from langsmith import run_trees
    from urllib3.util.retry import Retry

    retry = Retry(
        total=limits.retries,
        status_forcelist=[429, 500, 502, 503, 504],
        backoff_factor=0.2,
        allowed_methods=None,
        raise_on_redirect=False,
        raise_on_status=False,
        respect_retry_after_header=False,  # a server's Retry-After must not stretch the bound
    )
    client = run_trees.get_cached_client(
        timeout_ms=(int(limits.connect_s * 1000), int(limits.read_s * 1000)), retry_config=retry
    )
    _prepared["client"] = client
    atexit.register(flush_traces, limits.flush_s)
    return client


def flush_traces(timeout_s: float | None = None) -> bool:
    """Wait at most `timeout_s` for pending uploads; True when nothing is left to send."""
    client = _prepared.get("client")
    if client is None:
        from langsmith import run_trees

        client = run_trees._CLIENT  # the client langsmith made itself, if any
    if client is None:
        return True
    bound = TraceLimits.from_env().flush_s if timeout_s is None else timeout_s
    try:
        client.flush(timeout=bound)
    except Exception as exc:  # a broken upload must never fail the run that produced it
        log.warning("LangSmith flush failed: %s", exc)
        return False
    queue = getattr(client, "tracing_queue", None)
    pending = queue.unfinished_tasks if queue is not None else 0
    if pending:
        log.warning("LangSmith unreachable: %d run update(s) not sent within %.0f s; dropped", pending, bound)
    return not pending
