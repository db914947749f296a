"""Live progress of `stitchcuda eval`: problems done, verified, in flight and the ETA.

Why its own module: a suite takes hours, and whoever watches it wants to know how far it is and how
well it goes without reading every line. On a terminal a rich progress bar carries the counts; when
the output is a file or a pipe (CI logs, nohup) the same facts come as one plain line per event,
since a redrawn bar would only fill the log with control characters.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def record_line(record: dict[str, Any]) -> str:
    """'level1/1_ReLU: verified 1.02x vs eager, 0.98x vs default (259 s)': one finished problem."""
    speed = record.get("speedup_vs_eager")
    versus = record.get("speedup_vs_compile")
    return (
        f"{record['problem']}: {record.get('status')}"
        + (f" {speed:.2f}x vs eager" if speed else "")
        + (f", {versus:.2f}x vs {record.get('best_compile_mode')}" if versus else "")
        + (f" [{record['verdict']}]" if record.get("verdict") == "hacked" else "")
        + f" ({record.get('seconds', 0):.0f} s)"
    )


def eta_seconds(done_here: int, remaining: int, elapsed_s: float) -> float | None:
    """Remaining problems times the mean time per problem finished in this session (None before the first)."""
    if done_here <= 0 or remaining <= 0:
        return None if remaining > 0 else 0.0
    return elapsed_s / done_here * remaining


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class EvalProgress:
    """Counts for one eval; `started` and `finished` are called from the runner's worker threads."""

    def __init__(
        self,
        total: int,
        already: int,
        verified_already: int = 0,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.total, self.done, self.verified = total, already, verified_already
        self.in_flight: set[str] = set()
        self.done_here = 0
        self.clock = clock
        self.started_at = clock()
        self.live = self.console.is_terminal
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __enter__(self) -> EvalProgress:
        if self.live:
            self.bar = Progress(
                TextColumn("eval"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("verified {task.fields[verified]}, in flight {task.fields[in_flight]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self.bar.__enter__()
            self.task = self.bar.add_task(
                "eval", total=self.total, completed=self.done, verified=self.verified, in_flight=0
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)

    def _show(self, **progress: Any) -> None:
        """Redraw the bar with the current counts (progress: rich's completed=...)."""
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, verified=self.verified, in_flight=len(self.in_flight), **progress)

    def status_line(self) -> str:
        """'[3/24] 2 verified, 1 in flight, ETA 0:12:30': the plain form of the bar."""
        remaining = self.total - self.done
        eta = eta_seconds(self.done_here, remaining, self.clock() - self.started_at)
        return (
            f"[{self.done}/{self.total}] {self.verified} verified, {len(self.in_flight)} in flight, "
            f"ETA {_duration(eta)}"
        )

    def started(self, problem: str) -> None:
        self.in_flight.add(problem)
        if self.bar is not None:
            self._show()
        else:
            self.console.print(f"started {escape(problem)}; {self.status_line()}")

    def finished(self, record: dict[str, Any]) -> None:
        self.in_flight.discard(record["problem"])
        self.done += 1
        self.done_here += 1
        self.verified += record.get("status") == "verified"
        line = escape(record_line(record))
        if self.bar is not None:
            self.bar.console.print(line)
            self._show(completed=self.done)
        else:
            self.console.print(f"{line}; {self.status_line()}")
