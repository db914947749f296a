"""Ray for the executor's tests: skip without it, unless CI requires it (STITCHCUDA_REQUIRE_RAY=1)."""

from __future__ import annotations

import os
from types import ModuleType

import pytest


def require_ray() -> ModuleType:
    """The `ray` module; a module-level skip when it is missing, a failure when CI requires it."""
    try:
        import ray
    except ImportError:
        if os.environ.get("STITCHCUDA_REQUIRE_RAY") == "1":
            raise RuntimeError(
                'STITCHCUDA_REQUIRE_RAY=1 but Ray is not installed: pip install -e ".[ray]"'
            ) from None
        pytest.skip('no Ray (pip install -e ".[ray]")', allow_module_level=True)
    return ray
