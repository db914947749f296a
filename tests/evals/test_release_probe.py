"""The release probe (evals.device.release_probe) on the CPU: its buckets, its table, its refusals."""

from __future__ import annotations

import pytest

from evals.device import placement_probe, release_probe


def test_rounds_fall_into_buckets_of_time_since_the_release() -> None:
    curve = [(0.01, 1.2), (0.04, 1.4), (0.1, 1.1), (0.7, 1.0), (9.0, 1.0)]
    buckets = release_probe.bucketed(curve, quiet_ms=1.0)
    assert buckets[0] == pytest.approx(1.3)  # the two rounds of the first 50 ms
    assert buckets[1] == pytest.approx(1.1)
    assert buckets[2] is None  # no round started 200-500 ms after
    assert buckets[3] == pytest.approx(1.0)
    assert buckets[-1] == pytest.approx(1.0)  # after the last edge
    labels = [release_probe.bucket_label(i) for i in range(len(release_probe.BUCKETS_S) + 1)]
    assert labels[0] == "0ms-50ms" and labels[3] == "500ms-1s" and labels[-1] == ">4s"


def test_the_table_has_a_row_per_release_kind() -> None:
    row = {
        "problem": "p",
        "quiet_ms": 1.5,
        "buckets": {k: [1.0] + [None] * 6 for k in ("exit", "free", "quiet")},
    }
    text = release_probe.table([row])
    assert "| p | 1.500 | exit | 1.000 | - |" in text and "| free |" in text and "| quiet |" in text


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="on a GPU the probe runs")
def test_without_a_gpu_the_probe_refuses_and_the_neighbour_does_not_start() -> None:
    with pytest.raises(SystemExit):
        release_probe.main([])
    with pytest.raises(RuntimeError, match="did not start"):
        release_probe.released("exit", 0.001)
    for name in release_probe.DEFAULT_PROBLEMS:
        assert (placement_probe.SUITE / name).is_file(), name
