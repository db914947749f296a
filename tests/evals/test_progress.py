"""The eval's progress: plain lines off a terminal, a live bar on one, and an ETA from this session's pace."""

from __future__ import annotations

import io
import re

from rich.console import Console

from evals.progress import EvalProgress, eta_seconds, record_line


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_eta_is_the_session_pace_times_what_remains() -> None:
    assert eta_seconds(done_here=2, remaining=3, elapsed_s=100.0) == 150.0
    assert eta_seconds(done_here=0, remaining=3, elapsed_s=100.0) is None  # no pace yet
    assert eta_seconds(done_here=4, remaining=0, elapsed_s=100.0) == 0.0


def test_plain_lines_when_the_output_is_not_a_terminal() -> None:
    buffer = io.StringIO()
    clock = Clock()
    console = Console(file=buffer, force_terminal=False, width=200)
    with EvalProgress(total=4, already=1, verified_already=1, console=console, clock=clock) as progress:
        progress.started("level1/2_b")
        progress.started("level1/3_c")
        clock.now += 60.0
        progress.finished(
            {"problem": "level1/2_b", "status": "verified", "speedup_vs_eager": 1.5, "seconds": 60}
        )
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "started level1/2_b; [1/4] 1 verified, 1 in flight, ETA -"
    assert lines[1] == "started level1/3_c; [1/4] 1 verified, 2 in flight, ETA -"
    # one finished in 60 s here, two remain: two more minutes
    assert (
        lines[2] == "level1/2_b: verified 1.50x vs eager (60 s); [2/4] 2 verified, 1 in flight, ETA 0:02:00"
    )
    assert "\x1b[" not in buffer.getvalue()  # no control characters in a log


def test_a_live_bar_on_a_terminal_shows_the_counts() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=160)
    with EvalProgress(total=2, already=0, console=console) as progress:
        progress.started("level1/1_a")
        progress.finished({"problem": "level1/1_a", "status": "failed", "seconds": 3})
        progress.bar.refresh()  # type: ignore[union-attr]
        shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())
    assert "level1/1_a: failed (3 s)" in shown
    assert "1/2" in shown and "verified 0, in flight 0" in shown and "ETA" in shown


def test_record_line_names_the_compile_mode_and_a_hacked_verdict() -> None:
    line = record_line(
        {
            "problem": "level2/1_x",
            "status": "verified",
            "speedup_vs_eager": 2.0,
            "speedup_vs_compile": 0.5,
            "best_compile_mode": "default",
            "verdict": "hacked",
            "seconds": 9.4,
        }
    )
    assert line == "level2/1_x: verified 2.00x vs eager, 0.50x vs default [hacked] (9 s)"
