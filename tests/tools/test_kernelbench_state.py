"""kernelbench mode reproduces KernelBench's process state: its loading path and PyTorch's precision defaults.

In this process (no builds), on the CPU: each case is a candidate whose verdict differs between the
two modes for exactly one reason of the state (docs/kernelbench.md §1 and §5).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from support.worker_requests import affine_request, worker_candidate

from tools import build
from tools.worker import entry as worker
from tools.worker.guards import snapshot_guards
from tools.worker.kernelbench_state import PREFIX_LINES, kernelbench_prefix

# Correct only while cuDNN TF32 is allowed, PyTorch's default, which KernelBench leaves in place.
READS_TF32 = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        wrong = 0.0 if torch.backends.cudnn.allow_tf32 else 1.0
        return x * self.scale + self.bias + wrong
"""

# Uses `rows`, a constant only the reference defines: KernelBench runs both in one dict.
READS_REFERENCE_NAME = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        assert x.shape[0] == rows
        return x * self.scale + self.bias
"""


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    ce = build.cpp_extension()
    monkeypatch.setattr(ce, "load_inline", ce.load_inline)
    monkeypatch.setattr(ce, "load", ce.load)
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.delenv("TORCH_USE_CUDA_DSA", raising=False)
    saved = snapshot_guards()
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default, whatever an earlier test left
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved["torch.backends.cuda.matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = saved["torch.backends.cudnn.allow_tf32"]
    torch.set_float32_matmul_precision(saved["torch.get_float32_matmul_precision()"])
    sys.modules.pop("stitch_candidate", None)


def run(source: str, mode: str, tmp_path: Path) -> dict:
    return dict(worker.run_request(affine_request(source, tmp_path, mode=mode, perf_trials=3)))


def test_kernelbench_mode_leaves_cudnn_tf32_on_and_strict_pins_it_off(
    in_process: None, tmp_path: Path
) -> None:
    kb = run(READS_TF32, "kernelbench", tmp_path)
    assert kb["status"] == "passed", kb["message"]
    strict = run(READS_TF32, "strict", tmp_path)
    assert strict["status"] == "wrong_output", strict["message"]


def test_kernelbench_mode_runs_reference_and_candidate_in_one_dict(in_process: None, tmp_path: Path) -> None:
    kb = run(READS_REFERENCE_NAME, "kernelbench", tmp_path)
    assert kb["status"] == "passed", kb["message"]
    strict = run(READS_REFERENCE_NAME, "strict", tmp_path)
    assert strict["status"] == "runtime_error" and "rows" in strict["message"]


def test_a_first_line_construct_fails_after_the_prepended_lines(in_process: None, tmp_path: Path) -> None:
    source = "from __future__ import annotations\n" + worker_candidate("torch_ok.py")
    kb = run(source, "kernelbench", tmp_path)
    assert kb["status"] == "runtime_error"
    assert "syntax error at line 1 after KernelBench's two prepended lines" in kb["message"]
    assert run(source, "strict", tmp_path)["status"] == "passed"


def test_the_candidate_sees_kernelbench_environment(in_process: None, tmp_path: Path) -> None:
    probe = worker_candidate("torch_ok.py") + (
        "\nimport os as _os\n"
        "assert _os.environ['TORCH_USE_CUDA_DSA'] == '1'\n"
        "assert _os.environ['TORCH_EXTENSIONS_DIR'] == BUILD_DIRECTORY\n"
    )
    kb = run(probe, "kernelbench", tmp_path)
    assert kb["status"] == "passed", kb["message"]


def test_the_prefix_is_two_lines() -> None:
    assert kernelbench_prefix("/x").count("\n") == PREFIX_LINES
