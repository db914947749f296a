"""nodes.support.evidence: Profile artifacts from system summaries, the profilers switch."""

from __future__ import annotations

import pytest
from support.profiles import (
    system,
)

from nodes.support.evidence import profile_from_system


def test_profile_artifact_from_a_system_summary() -> None:
    profile = profile_from_system(system("host_sync", "candidate", 5))
    assert profile.source == "nsys" and profile.kernel_count == 26
    assert profile.top[0].calls == 24 and profile.device_ms == pytest.approx(0.9575)
    assert "GPU busy 18%" in profile.summary
