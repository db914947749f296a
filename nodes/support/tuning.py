"""Launch tuning in the optimise loop: the worker's tune action, cached, within the run's budget.

Why here: the profile node is where a passing candidate meets the GPU between coder turns. When the
candidate has launch knobs (docs/autotuning.md), the worker times their choices side by side and
the node hands the fastest table to the coder as a `[launch]` suggestion (codegen.advice), which
the offline coder writes into its next program and an LLM coder reads as advice.

The answer is cached per (GPU, problem, program), where the program is its source with the launch
table taken out, i.e. its fusion groups' code: the tuned program itself, a later run of the same
problem, and other machines sharing the cache file all find it there instead of searching again.
A search its budget cut short is cached too, with the (group, knob) pairs it went through; the next
profile of the same program resumes it there.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from graph.artifacts import Candidate, Task
from graph.context import Context
from graph.launch_advice import merge_launch, parse_launch
from nodes.support.worker_client import eval_request, run_worker
from tools import baseline_cache
from tools.protocol import waited_seconds

TUNE_CACHE_FILE = "tune.json"
TUNABLE_MARK = "STITCH_LAUNCH_CHOICES"  # a program that defines it follows the tuning protocol
RESERVE_S = 60.0  # run budget kept for the coder turn and verification that follow a tuning
# Below this share of the forward's device time in the program's own kernels, no launch knob can
# move the whole beyond the tuner's noise bar (1%: a 10% share would need a 10% faster kernel), and
# a search would hold the device lock for nothing: a cuBLAS/cuDNN-bound program is not tuned.
MIN_OWN_SHARE = 0.10
_TABLE_LINE = re.compile(r"^STITCH_LAUNCH\b[^\n]*$", re.MULTILINE)


@dataclass
class Tuning:
    """What the tuning gave: the changed knobs, the side-by-side speedup, and how it was obtained."""

    launch: dict[str, dict[str, int]] = field(default_factory=dict)
    speedup: float | None = None
    trials: int = 0
    cached: bool = False
    message: str = ""
    waited_s: float = 0.0  # the search's worker waiting for the device lock and the quiet window


def program_hash(source: str) -> str:
    """The program without its launch table: a tuned program has the hash of the one it was tuned on."""
    return baseline_cache.problem_hash(_TABLE_LINE.sub("STITCH_LAUNCH = ...", source))


def cache_key(device: str, task: Task, candidate: Candidate) -> str:
    return "|".join((device, baseline_cache.problem_hash(task.source), program_hash(candidate.source)))


def tune_budget(context: Context, spent_s: float) -> float:
    """Seconds the search may take: the configured budget, never eating the run's last RESERVE_S."""
    return max(0.0, min(context.tune_budget_s, context.wall_time_s - spent_s - RESERVE_S))


def tune_launch(
    task: Task,
    candidate: Candidate,
    context: Context,
    device: str,
    spent_s: float,
    own_share: float | None = None,
) -> Tuning | None:
    """The tuned launch table of a passing candidate, or None when tuning does not apply here.
    own_share: the profiled share of the forward's device time in the program's own kernels."""
    if context.device != "cuda" or context.tune_budget_s <= 0 or TUNABLE_MARK not in candidate.source:
        return None
    if own_share is not None and own_share < MIN_OWN_SHARE:
        return Tuning(
            message=f"launch tuning skipped: the program's own kernels take {own_share:.0%} of its device "
            f"time (below {MIN_OWN_SHARE:.0%}), so their launch knobs cannot move the whole beyond the noise"
        )
    path = baseline_cache.cache_path(None).with_name(TUNE_CACHE_FILE)
    key = cache_key(device, task, candidate)
    current = current_table(candidate.source)
    hit = baseline_cache.read_cache(path).get(key)
    if hit is not None and hit.get("complete"):
        return _from_answer(hit, current, cached=True)
    budget = tune_budget(context, spent_s)
    if budget < 1.0:
        if hit is not None:
            return _from_answer(hit, current, cached=True)
        return Tuning(message="launch tuning skipped: the run's budget is spent")
    request = eval_request(task, candidate.source, context, "tune")
    request["tune_budget_s"] = budget
    if hit is not None:  # an earlier search ran out of budget: go on from where it stopped
        request["tune_skip"] = hit.get("searched", [])
    response = run_worker(request, context)
    answer = response.get("tune")
    if response.get("status") != "passed" or not isinstance(answer, dict):
        return Tuning(message=f"launch tuning failed: {response.get('message') or response.get('status')}")
    if hit is not None:
        answer = resumed(hit, answer)
    if not answer.get("skipped"):
        baseline_cache.store(path, key, answer)
    tuning = _from_answer(answer, current, cached=False, message=str(response.get("message", "")))
    tuning.waited_s = round(waited_seconds(response), 3)
    return tuning


def resumed(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """One answer from a search and its resumption: the later one's knobs win where both set one."""
    merged = dict(later)
    merged["launch"] = merge_launch(earlier.get("launch", {}), later.get("launch", {}))
    merged["trials"] = [*earlier.get("trials", []), *later.get("trials", [])]
    merged["searched"] = [*earlier.get("searched", []), *later.get("searched", [])]
    if "speedup" not in later and "speedup" in earlier:
        merged["speedup"] = earlier["speedup"]
    return merged


def current_table(source: str) -> dict[str, dict[str, int]]:
    """The launch table a program's source holds ({} when it has none or it cannot be read)."""
    match = _TABLE_LINE.search(source)
    if match is None:
        return {}
    try:
        return parse_launch(ast.literal_eval(match.group(0).split("=", 1)[1].strip()))
    except (ValueError, SyntaxError, IndexError):
        return {}


def _from_answer(
    answer: dict[str, Any], current: dict[str, dict[str, int]], cached: bool, message: str = ""
) -> Tuning:
    """The tuned knobs that differ from the candidate's own table (a tuned program gets none)."""
    found = answer.get("launch")
    launch: dict[str, dict[str, int]] = {}
    for group, knobs in (found if isinstance(found, dict) else {}).items():
        changed = {k: v for k, v in knobs.items() if current.get(group, {}).get(k) != v}
        if changed:
            launch[group] = changed
    speedup = answer.get("speedup")
    trials = answer.get("trials")
    count = sum(len(k) for k in launch.values())
    return Tuning(
        launch=launch,
        speedup=float(speedup) if isinstance(speedup, (int, float)) and launch else None,
        trials=len(trials) if isinstance(trials, list) else 0,
        cached=cached,
        message=message or f"launch tuning cached for this program: {count} knob(s) to change",
    )
