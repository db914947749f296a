"""Test-wide settings: no tracing, no network, a build cache of the session's own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGSMITH_TEST_TRACKING"] = "false"
os.environ["LANGGRAPH_CLI_NO_ANALYTICS"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("PATH", "")
if "/usr/local/cuda/bin" not in os.environ["PATH"]:
    os.environ["PATH"] = "/usr/local/cuda/bin:" + os.environ["PATH"]


@pytest.fixture(scope="session", autouse=True)
def _session_build_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Hermetic build cache and RAG store for the session (shared by tests, so builds happen once)."""
    if "STITCHCUDA_TEST_KEEP_CACHE" not in os.environ:
        os.environ["STITCHCUDA_CACHE"] = str(tmp_path_factory.mktemp("build-cache"))
    os.environ.setdefault("STITCHCUDA_RAG_DIR", str(tmp_path_factory.mktemp("rag")))


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


FIXTURES = REPO / "tests" / "fixtures"
