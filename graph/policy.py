"""The policy seam: who plans, writes code and advises.

Nodes ask a policy for artifacts; the tools, the state and the routing are the same whoever answers.
A policy is looked up by the name in `Context.policy`. The built-in ones ('offline', 'llm') are
imported lazily so that importing the graph loads neither torch nor a model client; tests register
scripted policies here, the only place fakes belong.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Protocol

from graph.artifacts import Candidate, CoderMode, Feedback, Plan, Profile, Task, TestResult
from graph.context import Context


class Policy(Protocol):
    """What the planner, coder and verifier nodes ask of a policy."""

    name: str

    def plan(self, task: Task, reference_profile: Profile | None) -> Plan:
        """Analyse the reference and return the plan (subtasks, fusion groups, host plan)."""
        ...

    def write(self, task: Task, plan: Plan, candidate_id: int) -> Candidate:
        """Skill 1: write a whole program from scratch.

        A policy may also accept `feedback` (keyword): the coder then passes why its last write
        answer could not be used (`accepts_keyword` checks).
        """
        ...

    def revise(
        self,
        task: Task,
        plan: Plan,
        previous: Candidate,
        feedback: Feedback,
        mode: CoderMode,
        candidate_id: int,
    ) -> Candidate:
        """Skill 2: fix (mode='fix') or speed up (mode='optimize') `previous` given `feedback`."""
        ...

    def advise(
        self, task: Task, plan: Plan, candidate: Candidate, test: TestResult, profile: Profile
    ) -> Feedback:
        """Turn a passing candidate's profile into optimisation advice."""
        ...


PolicyFactory = Callable[[Context], Policy]

# name -> "module:attribute" of a factory taking the Context; imported on first use.
_BUILTIN: dict[str, str] = {
    "offline": "codegen.policy:OfflinePolicy",
    "llm": "nodes.llm.policy:LLMPolicy",
}
_REGISTERED: dict[str, PolicyFactory] = {}


class PolicyOutputError(Exception):
    """A policy could not produce a usable artifact (e.g. an LLM answered with unparsable code).

    The coder node turns it into Feedback(kind="parse_error") and takes the fix branch, so a bad
    answer is evidence for the next turn rather than a crash.
    """


class PolicyUnavailableError(Exception):
    """The policy cannot answer at all (settings missing, endpoint down after retries).

    Nothing to retry within this run: the node records the reason and the run ends as failed,
    keeping the best verified candidate so far.
    """


class UnknownPolicyError(ValueError):
    """The context names a policy nobody registered."""


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Make `factory` answer for `Context(policy=name)` (tests, plug-ins)."""
    _REGISTERED[name] = factory


def unregister_policy(name: str) -> None:
    _REGISTERED.pop(name, None)


def get_policy(context: Context) -> Policy:
    """The policy the context names, built for this context."""
    name = context.policy
    if name in _REGISTERED:
        return _REGISTERED[name](context)
    if name in _BUILTIN:
        module_name, attr = _BUILTIN[name].split(":")
        factory = getattr(importlib.import_module(module_name), attr)
        return factory(context)
    known = sorted(set(_BUILTIN) | set(_REGISTERED))
    raise UnknownPolicyError(f"unknown policy {name!r}; known: {', '.join(known)}")


def accepts_keyword(method: Any, name: str) -> bool:
    """Whether a policy method takes the optional keyword `name` (or **kwargs): extensions stay optional."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
