"""The tune action: search a program's launch knobs on the device, side by side, output checked.

Why in the worker: launch configurations (threads per block, float4 per thread per step) have no
right answer on paper; the fastest one depends on the GPU and the shape, so it is measured. A
program is tunable when it defines `STITCH_LAUNCH` (group -> knob -> value, read at every call),
`STITCH_LAUNCH_CHOICES` (knob -> allowed values) and `stitch_set_launch(group, knob, value)`; the
offline policy's programs do, and any program may (docs/autotuning.md).

The search is coordinate descent from the program's own table: one group and one knob at a time,
each other value timed against the best table so far in interleaved rounds (tools.worker.rounds),
kept only when the per-round ratio's median beats it by more than the noise (at least 1%). A value
that changes the output (beyond 1e-5 relative) is rejected whatever its speed. The search stops at
its budget; what it has found so far is the answer, with the (group, knob) pairs it went through,
so that a later search of the same program resumes there (`tune_skip`). A last side-by-side timing
of the starting table against the tuned one gives the speedup the answer reports.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Collection, Mapping
from typing import Any

import torch

from tools.protocol import EvalRequest, EvalResponse
from tools.worker import timing_window
from tools.worker.harness import Settings
from tools.worker.reporting import Progress
from tools.worker.rounds import Contestant, time_in_rounds

DEFAULT_BUDGET_S = 10.0
MIN_GAIN = 0.01  # a trial must beat the best table by at least this fraction (and by the noise)
ROUNDS = 6
CALLS_PER_ROUND = 3

Table = dict[str, dict[str, int]]


def copy_table(table: Mapping[str, Mapping[str, int]]) -> Table:
    return {group: dict(knobs) for group, knobs in table.items()}


class Knobs:
    """The program's launch table, set through its own setter (so a CUDA-graph program re-captures)."""

    def __init__(self, namespace: Mapping[str, Any]) -> None:
        self.table: Table = namespace["STITCH_LAUNCH"]
        self.choices: dict[str, tuple[int, ...]] = {
            str(k): tuple(int(v) for v in values) for k, values in namespace["STITCH_LAUNCH_CHOICES"].items()
        }
        self.setter: Callable[[str, str, int], None] = namespace["stitch_set_launch"]

    def snapshot(self) -> Table:
        return copy_table(self.table)

    def apply(self, wanted: Table) -> None:
        for group, knobs in wanted.items():
            for knob, value in knobs.items():
                if self.table[group][knob] != value:
                    self.setter(group, knob, value)


def tunable(namespace: Mapping[str, Any]) -> str:
    """'' when the program follows the tuning protocol, else why not."""
    table = namespace.get("STITCH_LAUNCH")
    if not isinstance(table, dict) or not table:
        return "the program has no launch knobs (no STITCH_LAUNCH table)"
    if not isinstance(namespace.get("STITCH_LAUNCH_CHOICES"), dict):
        return "the program has no STITCH_LAUNCH_CHOICES"
    if not callable(namespace.get("stitch_set_launch")):
        return "the program has no stitch_set_launch(group, knob, value)"
    return ""


def same_output(out: Any, expected: Any) -> bool:
    """Launch knobs must not change results (1e-5 relative allows a reordered reduction's rounding)."""
    if isinstance(out, torch.Tensor) and isinstance(expected, torch.Tensor):
        return out.shape == expected.shape and torch.allclose(
            out, expected, rtol=1e-5, atol=1e-6, equal_nan=True
        )
    if isinstance(out, (tuple, list)) and isinstance(expected, (tuple, list)):
        return len(out) == len(expected) and all(
            same_output(a, b) for a, b in zip(out, expected, strict=True)
        )
    return bool(out == expected)


def _side_by_side(
    knobs: Knobs, model: torch.nn.Module, tables: dict[str, Table], inputs: list[Any], device: torch.device
) -> dict[str, Any]:
    """Time each table's forward in interleaved rounds; the first table is the ratios' denominator."""

    def runner(table: Table) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            knobs.apply(table)
            return model(*args)

        return call

    contestants = [Contestant(name, runner(table)) for name, table in tables.items()]
    return time_in_rounds(
        contestants,
        [inputs],
        device,
        method="strict",
        warmup=2,
        trials=ROUNDS * CALLS_PER_ROUND,
        rounds=ROUNDS,
    )


def search(
    knobs: Knobs,
    model: torch.nn.Module,
    inputs: list[Any],
    device: torch.device,
    budget_s: float,
    progress: Callable[[str], None] = lambda _: None,
    skip: Collection[tuple[str, str]] = (),
) -> dict[str, Any]:
    """Coordinate descent over every group's knobs from the current table (module docstring).

    skip: (group, knob) pairs an earlier search of this program already went through (a search its
    budget cut short is resumed, not restarted); the answer's `searched` lists the pairs done.
    """
    started = time.monotonic()
    start = knobs.snapshot()
    with torch.no_grad():
        expected = model(*inputs)
    best = knobs.snapshot()
    trials: list[dict[str, Any]] = []
    searched: list[tuple[str, str]] = []
    skipped = set(skip)
    pairs = [(g, k) for g in start for k in start[g] if (g, k) not in skipped]
    for group, knob in pairs:
        values = [v for v in knobs.choices.get(knob.rsplit(".", 1)[-1], ()) if v != start[group][knob]]
        if values and time.monotonic() - started > budget_s:
            break
        for value in values:  # "stats.threads" takes the choices of "threads"
            progress(f"tuning {group}.{knob}={value}")
            trial = copy_table(best)
            trial[group][knob] = value
            record: dict[str, Any] = {"group": group, "knob": knob, "value": value}
            knobs.apply(trial)
            with torch.no_grad():
                out = model(*inputs)
            if not same_output(out, expected):
                record.update(kept=False, why="changed the output")
                trials.append(record)
                continue
            info = _side_by_side(knobs, model, {"best": best, "trial": trial}, inputs, device)
            ratio = info["ratios"]["trial"]
            median, cv = float(ratio.get("median", 1.0)), float(ratio.get("cv", 0.0))
            kept = median < 1.0 - max(MIN_GAIN, cv)
            record.update(ratio=round(median, 4), cv=round(cv, 4), kept=kept)
            trials.append(record)
            if kept:
                best = trial
        searched.append((group, knob))
    changed = {
        g: {k: v for k, v in knobs_.items() if start[g][k] != v}
        for g, knobs_ in best.items()
        if any(start[g][k] != v for k, v in knobs_.items())
    }
    answer: dict[str, Any] = {
        "launch": changed,
        "table": best,
        "trials": trials,
        "searched": [list(pair) for pair in searched],
        "complete": len(searched) == len(pairs),
        "budget_s": round(budget_s, 3),
    }
    if changed:
        info = _side_by_side(knobs, model, {"start": start, "tuned": best}, inputs, device)
        answer["start_ms"] = info["start"]["median_ms"]
        answer["tuned_ms"] = info["tuned"]["median_ms"]
        answer["speedup"] = round(1.0 / float(info["ratios"]["tuned"].get("median", 1.0)), 4)
    knobs.apply(best)
    answer["spent_s"] = round(time.monotonic() - started, 3)
    return answer


def tune(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    problem: types.ModuleType,
    namespace: dict[str, Any],
    models: tuple[torch.nn.Module, torch.nn.Module],
    device: torch.device,
    deadline: float,
) -> None:
    """Search the candidate's launch knobs within the request's budget and the worker's deadline.

    namespace: the globals the candidate's code runs in (its module's, or KernelBench's exec dict).
    """
    why_not = tunable(namespace)
    if why_not:
        response["tune"] = {"launch": {}, "trials": [], "complete": True, "skipped": why_not}
        response["message"] = f"nothing to tune: {why_not}"
        return
    settings = Settings(request)
    inputs = settings.seeded_inputs(problem, device)
    skip = {(str(g), str(k)) for g, k in request.get("tune_skip", [])}
    progress("waiting for the timing window")
    # every trial is a timing: in the machine-wide quiet window, as the verifier's (timing_window)
    with timing_window.quiet(request.get("cache_dir")) as waited:
        budget = float(request.get("tune_budget_s", DEFAULT_BUDGET_S))
        budget = max(0.0, min(budget, deadline - time.monotonic() - 10.0))  # leave time to answer
        answer = search(Knobs(namespace), models[1], inputs, device, budget, progress, skip)
    answer["window_wait_s"] = round(waited, 3)
    response["tune"] = answer  # type: ignore[typeddict-unknown-key]
    kept = sum(len(k) for k in answer["launch"].values())
    gain = f", {answer['speedup']:.3f}x side by side" if "speedup" in answer else ""
    response["message"] = (
        f"tuned {kept} launch knob(s) over {len(answer['trials'])} trial(s) in {answer['spent_s']:.1f} s{gain}"
        + ("" if answer["complete"] else " (budget reached)")
    )
