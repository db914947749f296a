"""Timing on the CPU: KernelBench's method (same tensors, first call discarded), the strict method, budgets."""

from __future__ import annotations

import time

import pytest
import torch

from tools.worker import timing


def test_kernelbench_timing_reuses_the_same_tensors_and_discards_the_first_call() -> None:
    seen: list[int] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        seen.append(id(x))
        return x

    x = torch.rand(4)
    stats = timing.time_kernelbench(fn, [x], "cpu", warmup=3, trials=5)
    assert stats["trials"] == 5 and stats["method"] == "kernelbench"
    assert len(seen) == 3 + 1 + 5 and set(seen) == {id(x)}


def test_strict_timing_rotates_clones_and_checks_every_output() -> None:
    sets = [[torch.full((3,), float(i))] for i in range(3)]
    seen: list[float] = []
    checked: list[int] = []
    after: list[int] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        seen.append(float(x[0]))
        assert all(x is not s[0] for s in sets)  # a clone, never the set itself
        return x + 1

    def check(index: int, out: torch.Tensor) -> None:
        checked.append(index)
        assert torch.equal(out, sets[index][0] + 1)

    stats = timing.time_strict(
        fn, sets, "cpu", warmup=2, trials=6, check=check, after_call=lambda: after.append(1)
    )
    assert stats["trials"] == 6 and stats["input_sets"] == 3 and stats["method"] == "strict"
    assert seen == [0.0, 1.0] + [float(i % 3) for i in range(7)]  # warm-ups, then discard + 6
    assert checked == [i % 3 for i in range(7)] and len(after) == 7

    def cached(x: torch.Tensor) -> torch.Tensor:
        return sets[0][0] + 1  # the answer for set 0, whatever the input

    with pytest.raises(AssertionError):
        timing.time_strict(cached, sets, "cpu", warmup=0, trials=3, check=check)


def test_strict_summary_flags_off_stream_work_and_clock_disagreement() -> None:
    honest = timing.strict_summary([1.0] * 5, [1.01] * 5, [1.02] * 5, 2)
    assert not honest["off_stream"] and not honest["clock_disagreement"] and honest["mean_ms"] == 1.0
    side_stream = timing.strict_summary([0.01] * 5, [2.0] * 5, [2.01] * 5, 2)
    assert side_stream["off_stream"] and side_stream["mean_ms"] == 2.0  # the device-wide time is reported
    patched = timing.strict_summary([1.0] * 5, [1.0] * 5, [5.0] * 5, 1)
    assert patched["clock_disagreement"] and not patched["off_stream"]
    assert honest["cuda_mallocs"] == 0
    assert timing.strict_summary([1.0] * 3, [1.0] * 3, [1.0] * 3, 1, [0, 2, 1])["cuda_mallocs"] == 3


def test_a_busy_hosts_synchronize_latency_is_not_taken_for_off_stream_work() -> None:
    """The device-wide end is recorded after the host wakes from its synchronize: a conv's eager baseline
    on a loaded H100 read 3.12 ms device-wide against 1.51 on its stream, all of it wake-up latency. The
    gap is taken net of each call's idle round trip; real side-stream work still shows."""
    stream, wide, host = [1.5] * 5, [3.1] * 5, [2.9] * 5
    assert timing.strict_summary(stream, wide, host, 1)["off_stream"]  # without the latency: a false flag
    busy = timing.strict_summary(stream, wide, host, 1, latency_ms=[1.55] * 5)
    assert not busy["off_stream"] and busy["mean_ms"] == 1.5 and busy["sync_latency_median_ms"] == 1.55
    assert busy["off_stream_gap_ms"] == pytest.approx(0.05)
    side = timing.strict_summary([0.01] * 5, [2.0] * 5, [2.01] * 5, 1, latency_ms=[0.02] * 5)
    assert side["off_stream"] and side["mean_ms"] == 2.0


def test_strict_timing_counts_the_allocators_new_segments_per_contestant() -> None:
    raw: dict[str, list[float]] = {}
    stats = timing.time_strict(torch.relu, [[torch.rand(8)]], "cpu", warmup=0, trials=4, raw=raw)
    assert stats["cuda_mallocs"] == 0 and raw["cuda_mallocs"] == [0, 0, 0, 0]  # no device: nothing to count
    assert len(raw["issue"]) == 4 and stats["issue_mean_ms"] > 0  # the host time to issue each call
    assert raw["sync_latency"] == [0.0] * 4  # no device: no synchronize round trip


def test_time_forward_dispatches_and_rejects_unknown_methods() -> None:
    x = torch.rand(4)
    assert timing.time_forward(torch.relu, [x], "cpu", warmup=0, trials=3)["method"] == "strict"
    assert timing.time_forward(torch.relu, [x], "cpu", 0, 3, method="kernelbench")["method"] == "kernelbench"
    with pytest.raises(ValueError, match="unknown timing method"):
        timing.time_forward(torch.relu, [x], "cpu", method="host")


def test_timing_stats_and_budget() -> None:
    stats = timing.timing_stats([1.0, 2.0, 3.0])
    assert stats == {"mean_ms": 2.0, "median_ms": 2.0, "std_ms": pytest.approx(0.816497), "min_ms": 1.0,
                     "cv": pytest.approx(0.408248),
                     "max_ms": 3.0, "trials": 3}  # fmt: skip
    x = torch.rand(4)
    full = timing.time_forward(lambda t: t * 2, [x], "cpu", warmup=1, trials=7)
    assert full["trials"] == 7 and full["min_ms"] > 0

    def slow(t: torch.Tensor) -> torch.Tensor:
        time.sleep(0.05)
        return t

    cut = timing.time_forward(slow, [x], "cpu", warmup=0, trials=100, budget_s=0.2)
    assert 1 <= cut["trials"] <= 5
