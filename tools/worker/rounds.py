"""Side-by-side timing: several contestants timed in interleaved rounds (A B A B ...) in one window.

Why: a ratio of two times is only meaningful when both were taken under the same conditions. Timing
the candidate for a second and then eager for a second lets a neighbour's burst, a clock change or
thermal drift land on one side only. Here every contestant runs a short block of calls in turn,
round after round, with the method of the caller's harness mode (tools.worker.timing: KernelBench's
CUDA-event method or the strict one); the blocks of one contestant are pooled into its stats, and
each round also gives a per-round ratio against the first contestant, whose spread shows how
stable the ratio is. The recorded `order` lists the blocks as they ran, so the interleaving is
visible in every answer. The caller holds the quiet timing window (tools.worker.timing_window).

Placement shuffle ($STITCHCUDA_TIMING_SHUFFLE=1, or shuffle=True): each round first allocates a spacer
of a size set by the round's index (the same sequence in every process), so the caching allocator
puts that round's input clones, outputs and L2-flush buffer at other addresses. Measured on an H100
(docs/timing.md, "Eager agreement"): placement moves a round's mean by 3-7%, but the spread between
processes stayed as wide, so it is off by default. CPU pinning of the timing thread
($STITCHCUDA_TIMING_CPUS, tools.worker.cpu_pinning) is the next remedy under test, off likewise.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from tools.worker import cpu_pinning, timing
from tools.worker.timing_window import SHUFFLE_ENV, shuffle_default  # noqa: F401  (SHUFFLE_ENV: re-exported)

DEFAULT_ROUNDS = 10
SPACER_STEP_BYTES = 4096
SPACER_MAX_BYTES = 64 * 1024 * 1024


def spacer_bytes(index: int) -> int:
    """Round `index`'s spacer size: a multiple of 4 KiB below 64 MiB, the same in every process."""
    return random.Random(index).randrange(1, SPACER_MAX_BYTES // SPACER_STEP_BYTES) * SPACER_STEP_BYTES


class ContestantFailed(Exception):
    """A contestant's call raised while being timed; `error` is what it raised."""

    def __init__(self, name: str, error: Exception) -> None:
        super().__init__(f"{name}: {error}")
        self.name = name
        self.error = error


@dataclass
class Contestant:
    """One function to time: its name in the answer and what runs around each of its calls."""

    name: str
    fn: Callable[..., Any]
    check: timing.OutputCheck | None = None
    after_call: Callable[[], None] | None = None
    samples: dict[str, list[float]] = field(default_factory=dict)
    kernelbench_samples: list[float] = field(default_factory=list)
    round_means: list[float] = field(default_factory=list)


def _block(
    contestant: Contestant,
    method: str,
    input_sets: Sequence[Sequence[Any]],
    device: torch.device,
    warmup: int,
    calls: int,
    discard_first: int,
    before_flush: Callable[[], None] | None,
) -> float:
    """Time one block of `calls` calls; returns the block's headline mean."""
    try:
        return _timed_block(
            contestant, method, input_sets, device, warmup, calls, discard_first, before_flush
        )
    except Exception as exc:
        raise ContestantFailed(contestant.name, exc) from exc


def _timed_block(
    contestant: Contestant,
    method: str,
    input_sets: Sequence[Sequence[Any]],
    device: torch.device,
    warmup: int,
    calls: int,
    discard_first: int,
    before_flush: Callable[[], None] | None,
) -> float:
    if method == "kernelbench":
        stats = timing.time_kernelbench(
            contestant.fn,
            input_sets[0],
            device,
            warmup,
            calls,
            None,
            discard_first,
            raw=contestant.kernelbench_samples,
        )
    else:
        stats = timing.time_strict(
            contestant.fn,
            input_sets,
            device,
            warmup,
            calls,
            None,
            check=contestant.check,
            after_call=contestant.after_call,
            before_flush=before_flush,
            discard_first=discard_first,
            raw=contestant.samples,
        )
    return float(stats["mean_ms"])


def _summary(contestant: Contestant, method: str, input_sets: int) -> dict[str, Any]:
    if method == "kernelbench":
        stats: dict[str, Any] = dict(timing.timing_stats(contestant.kernelbench_samples))
        stats["method"] = "kernelbench"
    else:
        raw = contestant.samples
        stats = timing.strict_summary(
            raw["stream"],
            raw["device_wide"],
            raw["host"],
            input_sets,
            raw.get("cuda_mallocs", ()),
            raw.get("issue", ()),
            raw.get("sync_latency", ()),
        )
    stats["rounds"] = len(contestant.round_means)
    stats["round_means_ms"] = [round(m, 6) for m in contestant.round_means]
    return stats


def _ratio_stats(first: Contestant, other: Contestant) -> dict[str, Any]:
    """other / first per round: the side-by-side ratio (a speedup of `first` over `other`)."""
    ratios = [o / f for f, o in zip(first.round_means, other.round_means, strict=True) if f > 0]
    if not ratios:
        return {}
    mean = statistics.fmean(ratios)
    return {
        "median": round(statistics.median(ratios), 6),
        "mean": round(mean, 6),
        "cv": round(statistics.pstdev(ratios) / mean, 6) if mean > 0 else 0.0,
        "rounds": len(ratios),
    }


def time_in_rounds(
    contestants: Sequence[Contestant],
    input_sets: Sequence[Sequence[Any]],
    device: torch.device | str,
    *,
    method: str = "strict",
    warmup: int = 3,
    trials: int = 100,
    rounds: int = DEFAULT_ROUNDS,
    budget_s: float | None = None,
    before_flush: Callable[[], None] | None = None,
    shuffle: bool | None = None,
    pin: str | None = None,
) -> dict[str, Any]:
    """Time every contestant in `rounds` interleaved rounds of about trials/rounds calls each.

    input_sets: the identically prepared inputs every contestant is called on (KernelBench's method
    uses set 0 only, as KernelBench does). Round 0 carries the warm-ups and the discarded first call;
    later rounds run when the budget (seconds, for all rounds) holds another one, so at least one
    round always runs. shuffle: a placement spacer per round on a CUDA device (module docstring; None:
    $STITCHCUDA_TIMING_SHUFFLE). pin: the cores the timing thread runs on (tools.worker.cpu_pinning's
    spec; None: $STITCHCUDA_TIMING_CPUS). A contestant's exception comes out as ContestantFailed.
    Returns {name: stats (mean, median, cv, rounds ...)}, "order" (the blocks as they ran), "rounds",
    "ratios" ({name: stats of name/first per round}), "shuffle" (the spacers' bytes, when on) and
    "cpus" (the cores, when pinned).
    """
    if method not in ("strict", "kernelbench"):
        raise ValueError(f"unknown timing method {method!r} (strict or kernelbench)")
    if not contestants:
        raise ValueError("time_in_rounds needs at least one contestant")
    if trials < 1 or rounds < 1:
        raise ValueError(f"trials and rounds must be >= 1, got {trials} and {rounds}")
    device = torch.device(device)
    rounds = min(rounds, trials)
    calls = math.ceil(trials / rounds)
    shuffle = (shuffle_default() if shuffle is None else shuffle) and device.type == "cuda"
    spec = cpu_pinning.pinning_spec() if pin is None else pin
    cpus = cpu_pinning.cpus_for(
        spec, cpu_pinning.pci_bus_id(device) if spec and device.type == "cuda" else None
    )
    spacers: list[int] = []
    order: list[str] = []
    with cpu_pinning.pinned(cpus) as used:
        started = time.perf_counter()
        for index in range(rounds):
            first_round = index == 0
            round_started = time.perf_counter()
            spacer = None
            if shuffle:
                spacers.append(spacer_bytes(index))
                spacer = torch.empty(spacers[-1], dtype=torch.uint8, device=device)
            for contestant in contestants:
                mean = _block(
                    contestant,
                    method,
                    input_sets,
                    device,
                    warmup if first_round else 0,
                    calls,
                    1 if first_round else 0,
                    before_flush,
                )
                contestant.round_means.append(mean)
                order.append(contestant.name)
            del spacer
            if budget_s is not None and index + 1 < rounds:
                spent = time.perf_counter() - started
                per_round = time.perf_counter() - round_started
                if spent + per_round > budget_s:
                    break
    info: dict[str, Any] = {c.name: _summary(c, method, len(input_sets)) for c in contestants}
    info["order"] = order
    info["rounds"] = len(contestants[0].round_means)
    info["ratios"] = {c.name: _ratio_stats(contestants[0], c) for c in contestants[1:]}
    if shuffle:
        info["shuffle"] = spacers
    if used:
        info["cpus"] = sorted(used)
    return info
