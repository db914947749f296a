"""Interleaved timing rounds on the CPU: the order of calls, the pooled stats, the per-round ratios."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tools import baseline_cache
from tools.worker import rounds
from tools.worker.rounds import Contestant, ContestantFailed, time_in_rounds


def _recording(name: str, calls: list[str]) -> Callable[..., Any]:
    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(name)
        return x * 2

    return fn


@pytest.mark.parametrize("method", ["strict", "kernelbench"])
def test_contestants_alternate_in_rounds(method: str) -> None:
    calls: list[str] = []
    contestants = [Contestant("a", _recording("a", calls)), Contestant("b", _recording("b", calls))]
    info = time_in_rounds(contestants, [[torch.rand(8)]], "cpu", method=method, warmup=2, trials=12, rounds=4)
    assert info["order"] == ["a", "b"] * 4 and info["rounds"] == 4
    # round 0: 2 warm-ups + 1 discarded + 3 counted per contestant; later rounds: 3 counted calls
    assert calls == ["a"] * 6 + ["b"] * 6 + (["a"] * 3 + ["b"] * 3) * 3
    for name in ("a", "b"):
        stats = info[name]
        assert stats["trials"] == 12 and stats["rounds"] == 4 and len(stats["round_means_ms"]) == 4
        assert stats["method"] == method
        assert stats["min_ms"] <= stats["median_ms"] <= stats["max_ms"] and stats["cv"] >= 0
    assert set(info["ratios"]) == {"b"} and info["ratios"]["b"]["rounds"] == 4


def test_ratio_is_per_round() -> None:
    contestants = [Contestant("fast", lambda x: x), Contestant("slow", lambda x: x)]
    contestants[0].round_means, contestants[1].round_means = [1.0, 2.0], [3.0, 4.0]
    ratio = rounds._ratio_stats(contestants[0], contestants[1])
    assert ratio["median"] == pytest.approx(2.5) and ratio["rounds"] == 2 and ratio["cv"] > 0


def test_strict_rounds_check_every_output_and_pool_the_three_clocks() -> None:
    checked: list[int] = []

    def check(index: int, out: Any) -> None:
        checked.append(index)

    sets = [[torch.rand(4)], [torch.rand(4)]]
    contestant = Contestant("c", lambda x: x + 1, check=check)
    info = time_in_rounds([contestant], sets, "cpu", warmup=0, trials=6, rounds=3)
    assert len(checked) == 1 + 6  # the discarded first call is checked too
    assert info["c"]["input_sets"] == 2 and len(contestant.samples["host"]) == 6


def test_a_failing_contestant_is_named() -> None:
    def broken(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("no")

    with pytest.raises(ContestantFailed) as failed:
        time_in_rounds([Contestant("a", lambda x: x), Contestant("b", broken)], [[torch.rand(2)]], "cpu")
    assert failed.value.name == "b" and isinstance(failed.value.error, ValueError)


def test_fewer_rounds_than_calls_and_bad_arguments() -> None:
    info = time_in_rounds([Contestant("a", lambda x: x)], [[torch.rand(2)]], "cpu", trials=3, rounds=10)
    assert info["rounds"] == 3
    with pytest.raises(ValueError, match="method"):
        time_in_rounds([Contestant("a", lambda x: x)], [[torch.rand(2)]], "cpu", method="fast")
    with pytest.raises(ValueError, match="contestant"):
        time_in_rounds([], [[torch.rand(2)]], "cpu")


def test_the_cache_knows_the_default_round_count() -> None:
    assert baseline_cache.DEFAULT_ROUNDS == rounds.DEFAULT_ROUNDS
    assert ":rounds=10" in baseline_cache.timing_method({})
    assert baseline_cache.timing_method({"timing_rounds": 5}) != baseline_cache.timing_method({})


@pytest.mark.parametrize("value", ["", "0", "1", "on", "off", "yes"])
def test_the_cache_and_the_rounds_read_the_shuffle_switch_alike(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert baseline_cache.SHUFFLE_ENV == rounds.SHUFFLE_ENV
    monkeypatch.setenv(rounds.SHUFFLE_ENV, value)
    shuffled = rounds.shuffle_default()
    assert shuffled == (value in ("1", "on", "yes"))
    # a shuffled time is another timing method: it never answers from an unshuffled cache entry
    assert (":shuffle=on" in baseline_cache.timing_method({})) == shuffled


def test_spacers_are_the_same_sequence_everywhere_and_stay_small() -> None:
    sizes = [rounds.spacer_bytes(i) for i in range(10)]
    assert sizes == [rounds.spacer_bytes(i) for i in range(10)]
    assert len(set(sizes)) == 10  # each round another placement
    assert all(0 < s < rounds.SPACER_MAX_BYTES and s % rounds.SPACER_STEP_BYTES == 0 for s in sizes)


def test_shuffle_is_a_device_placement_and_leaves_a_cpu_timing_alone() -> None:
    info = time_in_rounds([Contestant("a", lambda x: x)], [[torch.rand(2)]], "cpu", trials=4, shuffle=True)
    assert "shuffle" not in info and info["rounds"] == 4
