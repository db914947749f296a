"""Launch tuning in the optimise loop: the cache, the budget, and what reaches the coder (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph.artifacts import Candidate, Task
from graph.context import Context
from nodes.support import tuning
from tools import baseline_cache

PROGRAM = """import torch
STITCH_LAUNCH: dict[str, dict[str, int]] = {'g1': {'unroll': 1, 'threads': 256}, 'g3': {'unroll': 1, 'threads': 256}}
STITCH_LAUNCH_CHOICES = {"threads": (128, 256, 512, 1024), "unroll": (1, 2)}
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(baseline_cache.CACHE_ENV, str(tmp_path))
    return tmp_path / tuning.TUNE_CACHE_FILE


def _task() -> Task:
    return Task(name="p", path="p.py", source="class Model: ...")


def test_the_program_hash_ignores_the_launch_table() -> None:
    tuned = PROGRAM.replace("'g3': {'unroll': 1, 'threads': 256}", "'g3': {'unroll': 2, 'threads': 512}")
    assert tuning.program_hash(tuned) == tuning.program_hash(PROGRAM)
    assert tuning.program_hash(PROGRAM.replace("import torch", "import torch as t")) != tuning.program_hash(
        PROGRAM
    )
    assert tuning.current_table(tuned)["g3"] == {"unroll": 2, "threads": 512}
    assert tuning.current_table("x = 1") == {}


def test_a_cached_answer_is_used_and_only_what_differs_reaches_the_coder(cache: Path) -> None:
    task, candidate = _task(), Candidate(id=1, source=PROGRAM, mode="write", policy="offline")
    answer = {"launch": {"g3": {"threads": 512}}, "speedup": 1.07, "trials": [{}, {}], "complete": True}
    baseline_cache.store(cache, tuning.cache_key("NVIDIA H200", task, candidate), answer)
    context = Context(device="cuda")
    found = tuning.tune_launch(task, candidate, context, "NVIDIA H200", spent_s=0.0)
    assert found is not None and found.cached
    assert found.launch == {"g3": {"threads": 512}} and found.speedup == 1.07 and found.trials == 2
    # the tuned program has the same hash and already holds the table: nothing more to change
    tuned = Candidate(
        id=2,
        source=PROGRAM.replace("'g3': {'unroll': 1, 'threads': 256}", "'g3': {'unroll': 1, 'threads': 512}"),
        mode="optimize",
        policy="offline",
    )
    again = tuning.tune_launch(task, tuned, context, "NVIDIA H200", spent_s=0.0)
    assert again is not None and again.cached and again.launch == {} and again.speedup is None
    # another GPU is another key: no answer there (and no GPU here, so the worker says why)
    other = tuning.tune_launch(task, candidate, context, "NVIDIA H100", spent_s=0.0)
    assert other is not None and not other.cached and other.launch == {}
    assert other.message.startswith("launch tuning failed")


def test_tuning_applies_only_on_a_gpu_with_budget_and_knobs(cache: Path) -> None:
    task, candidate = _task(), Candidate(id=1, source=PROGRAM, mode="write", policy="offline")
    assert tuning.tune_launch(task, candidate, Context(device="cpu"), "cpu", 0.0) is None
    assert tuning.tune_launch(task, candidate, Context(device="cuda", tune_budget_s=0), "H200", 0.0) is None
    plain = Candidate(id=1, source="class ModelNew: ...", mode="write", policy="llm")
    assert tuning.tune_launch(task, plain, Context(device="cuda"), "H200", 0.0) is None
    spent = tuning.tune_launch(task, candidate, Context(device="cuda", wall_time_s=100.0), "H200", 90.0)
    assert spent is not None and "budget is spent" in spent.message
    assert tuning.tune_budget(Context(tune_budget_s=20.0, wall_time_s=1800.0), 1770.0) == 0.0
    assert tuning.tune_budget(Context(tune_budget_s=20.0, wall_time_s=1800.0), 100.0) == 20.0
    assert not cache.exists()  # nothing was stored without an answer


def test_a_library_bound_program_is_not_tuned(cache: Path) -> None:
    task, candidate = _task(), Candidate(id=1, source=PROGRAM, mode="write", policy="offline")
    context = Context(device="cuda")
    skipped = tuning.tune_launch(task, candidate, context, "H200", 0.0, own_share=0.04)
    assert skipped is not None and skipped.launch == {} and "4% of its device time" in skipped.message
    # at the bar the search runs (here without a GPU, so the worker answers why it could not)
    ran = tuning.tune_launch(task, candidate, context, "H200", 0.0, own_share=tuning.MIN_OWN_SHARE)
    assert ran is not None and ran.message.startswith("launch tuning failed")


def test_a_search_cut_short_is_resumed_and_merged(cache: Path) -> None:
    earlier = {
        "launch": {"g1": {"threads": 512}},
        "searched": [["g1", "threads"]],
        "trials": [{"group": "g1"}],
        "complete": False,
        "speedup": 1.05,
    }
    later = {
        "launch": {"g3": {"unroll": 2}},
        "searched": [["g1", "unroll"]],
        "trials": [{"group": "g3"}],
        "complete": True,
    }
    merged = tuning.resumed(earlier, later)
    assert merged["launch"] == {"g1": {"threads": 512}, "g3": {"unroll": 2}} and merged["complete"]
    assert merged["searched"] == [["g1", "threads"], ["g1", "unroll"]] and len(merged["trials"]) == 2
    assert merged["speedup"] == 1.05
    # an unfinished answer in the cache, and no budget left: what it found so far still reaches the coder
    task, candidate = _task(), Candidate(id=1, source=PROGRAM, mode="write", policy="offline")
    baseline_cache.store(cache, tuning.cache_key("H200", task, candidate), earlier)
    found = tuning.tune_launch(task, candidate, Context(device="cuda", wall_time_s=100.0), "H200", 90.0)
    assert found is not None and found.cached and found.launch == {"g1": {"threads": 512}}
