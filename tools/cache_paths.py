"""Where the build cache and its precompiled headers live: one rule for every process.

Why its own module: the build system (torch), the worker's timing window and the sandbox (standard
library only, on either side of the isolation boundary) must all agree on these trees, and none of
them may import the others for it. Standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

CACHE_ENV = "STITCHCUDA_CACHE"
PCH_DIR_ENV = "STITCHCUDA_PCH_DIR"


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$STITCHCUDA_CACHE`, else ~/.cache/stitchcuda/build."""
    env = os.environ if environ is None else environ
    value = env.get(CACHE_ENV)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "stitchcuda" / "build"


def pch_root(cache_root: Path, environ: Mapping[str, str] | None = None) -> Path:
    """$STITCHCUDA_PCH_DIR, else `<cache>-pch` beside the build cache (one set per toolchain and flags)."""
    env = os.environ if environ is None else environ
    value = env.get(PCH_DIR_ENV)
    return Path(value).expanduser() if value else cache_root.with_name(cache_root.name + "-pch")
