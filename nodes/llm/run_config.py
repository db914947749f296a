"""Names, tags and metadata for every model call, so LangSmith traces can be filtered and compared.

Inside a graph node the call also nests under the node's run (langchain reads the parent run from
context variables), so only what identifies the call itself is added here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graph.artifacts import Task
from nodes.llm.settings import RoleSettings

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


def call_config(
    settings: RoleSettings,
    task: Task,
    *,
    iteration: int,
    mode: str | None = None,
    candidate: int | None = None,
    policy: str = "llm",
) -> RunnableConfig:
    """The RunnableConfig fields for one model call: run_name, tags, metadata."""
    role = settings.role
    name = f"stitchcuda.{role}" + (f".{mode}" if mode else "")
    tags = ["stitchcuda", f"role:{role}", f"policy:{policy}", f"problem:{task.name}"]
    if mode:
        tags.append(f"mode:{mode}")
    metadata: dict[str, Any] = {
        "problem": task.name,
        "iteration": iteration,
        "role": role,
        "policy": policy,
        "model": settings.model,
        "base_url": settings.base_url or "openai",
    }
    if mode:
        metadata["mode"] = mode
    if candidate is not None:
        metadata["candidate"] = candidate
    if task.level:
        metadata["level"] = task.level
    return {"run_name": name, "tags": tags, "metadata": metadata}
