"""The machine-wide timing window: real processes contending for real lock files.

Each helper process appends events to one shared log (O_APPEND: lines land in the order they were
written), so what is asserted is the order of events, never a duration.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from tools.build import cache as build_cache
from tools.worker import timing_window

HOLDER = textwrap.dedent(
    """
    import os, sys, time
    from tools.worker import timing_window

    kind, name, folder, log, hold_s = sys.argv[1:6]

    def event(what):
        with open(log, "a") as fh:
            fh.write(f"{name}:{what}\\n")

    event("wants")
    window = timing_window.quiet if kind == "quiet" else timing_window.busy
    with window(folder):
        event("start")
        time.sleep(float(hold_s))
        event("end")
    """
)


def _child(script: str, *args: str) -> subprocess.Popen[bytes]:
    """A helper process running `script` with the window on (no $STITCHCUDA_TIMING_WINDOW)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(timing_window.WINDOW_ENV, None)
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env)


def _start(kind: str, name: str, folder: Path, log: Path, hold_s: float) -> subprocess.Popen[bytes]:
    return _child(HOLDER, kind, name, str(folder), str(log), str(hold_s))


def _events(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def _wait_for(log: Path, event: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while event not in _events(log):
        if time.monotonic() > deadline:
            raise AssertionError(f"{event} never happened: {_events(log)}")
        time.sleep(0.02)


@pytest.fixture(autouse=True)
def _window_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(timing_window.WINDOW_ENV, raising=False)


def test_a_timing_waits_for_a_running_build_and_a_build_waits_for_a_timing(tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    build = _start("busy", "build", tmp_path, log, 0.6)
    _wait_for(log, "build:start")
    timing = _start("quiet", "timing", tmp_path, log, 0.6)
    _wait_for(log, "timing:start")
    later_build = _start("busy", "later", tmp_path, log, 0.0)
    for proc in (build, timing, later_build):
        assert proc.wait(timeout=60) == 0
    events = _events(log)
    assert events.index("build:end") < events.index("timing:start")
    assert events.index("timing:end") < events.index("later:start")


def test_builds_share_the_window(tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    first = _start("busy", "a", tmp_path, log, 1.0)
    _wait_for(log, "a:start")
    second = _start("busy", "b", tmp_path, log, 0.0)
    assert second.wait(timeout=60) == 0 and first.wait(timeout=60) == 0
    events = _events(log)
    assert events.index("b:end") < events.index("a:end")  # b ran while a still held the window


def test_a_waiting_timing_is_not_starved_by_new_builds(tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    build = _start("busy", "build", tmp_path, log, 1.0)
    _wait_for(log, "build:start")
    timing = _start("quiet", "timing", tmp_path, log, 0.2)
    _wait_for(log, "timing:wants")
    time.sleep(0.3)  # the timing is now queued at the gate, waiting for the running build
    newcomer = _start("busy", "newcomer", tmp_path, log, 0.0)
    for proc in (build, timing, newcomer):
        assert proc.wait(timeout=60) == 0
    events = _events(log)
    assert events.index("build:end") < events.index("timing:start") < events.index("timing:end")
    assert events.index("timing:end") < events.index("newcomer:start")


def _window_is_held(cache: Path) -> bool:
    """From another process: can the window of this cache (or moved folder) not be taken right now?"""
    folder = timing_window.window_dir(cache)
    assert folder is not None
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n"
    )
    code = subprocess.run([sys.executable, "-c", probe, str(folder / timing_window.WINDOW_FILE)]).returncode
    return code == 3


def test_an_extension_build_holds_the_window_shared(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def build(directory: str, module_name: str) -> object:
        seen["held"] = _window_is_held(tmp_path)
        return object()

    module = build_cache.cached_build("probe", {"kind": "probe"}, False, True, [], build, tmp_path)
    assert module is not None and seen["held"] is True
    assert not _window_is_held(tmp_path)  # released once the build is over


def test_nesting_in_one_thread(tmp_path: Path) -> None:
    with timing_window.quiet(tmp_path):
        with timing_window.busy(tmp_path) as waited:  # a lazy build inside a timing: no self-wait
            assert waited == 0.0
        with timing_window.quiet(tmp_path):
            assert _window_is_held(tmp_path)
    with (
        timing_window.busy(tmp_path),
        pytest.raises(RuntimeError, match="inside a build"),
        timing_window.quiet(tmp_path),
    ):
        pass


def test_the_window_can_be_turned_off_or_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(timing_window.WINDOW_ENV, "off")
    assert timing_window.window_dir(tmp_path) is None
    with timing_window.quiet(tmp_path):
        assert not (tmp_path / "locks").exists()
    shared = tmp_path / "machine"
    monkeypatch.setenv(timing_window.WINDOW_ENV, str(shared))
    with timing_window.quiet(tmp_path / "cache"):
        assert (shared / timing_window.WINDOW_FILE).exists() and _window_is_held(tmp_path / "cache")


def test_a_killed_holder_leaves_the_window_open(tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    holder = _start("quiet", "holder", tmp_path, log, 60.0)
    _wait_for(log, "holder:start")
    holder.kill()
    holder.wait(timeout=30)
    folder = timing_window.window_dir(tmp_path)
    assert folder is not None and folder == tmp_path / "locks"
    fd = os.open(folder / timing_window.WINDOW_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the dead holder still had it
    finally:
        os.close(fd)


LEAVER = textwrap.dedent(
    """
    import os, sys, time
    from tools.worker import timing_window

    folder, log, go, cuda, wait_s = sys.argv[1:6]
    with timing_window.busy(folder):  # as a worker: it used the window (and, when cuda, the GPU)
        pass
    timing_window._cuda_initialised = lambda: cuda == "1"
    with open(log, "a") as fh:
        fh.write("leaver:ready\\n")
    while not os.path.exists(go):
        time.sleep(0.01)
    timing_window.exit_process(3, float(wait_s))
    """
)


def _leaver(tmp_path: Path, cuda: bool, wait_s: float) -> subprocess.Popen[bytes]:
    args = [
        str(tmp_path),
        str(tmp_path / "events.log"),
        str(tmp_path / "go"),
        "1" if cuda else "0",
        str(wait_s),
    ]
    return _child(LEAVER, *args)


def test_a_gpu_process_leaves_after_the_timing_next_door_ends(tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    leaver = _leaver(tmp_path, cuda=True, wait_s=120.0)
    _wait_for(log, "leaver:ready")
    holder = _start("quiet", "holder", tmp_path, log, 2.0)
    _wait_for(log, "holder:start")
    (tmp_path / "go").touch()
    assert leaver.wait(timeout=120) == 3
    assert "holder:end" in _events(log)  # it died only once the timing had ended
    holder.wait(timeout=30)


@pytest.mark.parametrize("cuda, wait_s", [(False, 120.0), (True, 0.2)])
def test_a_process_without_a_gpu_or_past_its_wait_leaves_at_once(
    tmp_path: Path, cuda: bool, wait_s: float
) -> None:
    log = tmp_path / "events.log"
    leaver = _leaver(tmp_path, cuda=cuda, wait_s=wait_s)
    _wait_for(log, "leaver:ready")
    holder = _start("quiet", "holder", tmp_path, log, 120.0)
    try:
        _wait_for(log, "holder:start")
        (tmp_path / "go").touch()
        assert leaver.wait(timeout=60) == 3
        assert "holder:end" not in _events(log)
    finally:
        holder.kill()
        holder.wait(timeout=30)
