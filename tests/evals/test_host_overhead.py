"""The host-time split of the device diagnosis: the stand-in for a program's extension module times and
counts every call and passes everything else through (the device side itself needs a GPU)."""

from __future__ import annotations

import time
import types

from evals.device.host_overhead import TimedExtension


def test_timed_extension_counts_calls_and_their_host_time() -> None:
    ext = types.SimpleNamespace(run=lambda seconds: time.sleep(seconds) or "done", version=3)
    timed = TimedExtension(ext)
    assert timed.run(0.02) == "done" and timed.run(0.0) == "done"
    assert timed.calls == 2 and 0.02 <= timed.seconds < 1.0
    assert timed.version == 3 and timed.calls == 2  # plain attributes pass through, uncounted
