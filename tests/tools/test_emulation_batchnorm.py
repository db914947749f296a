"""Batch norm's module state in the CPU emulation: the statistics kernel updates the running mean and
variance and counts the batch in `num_batches_tracked` as PyTorch does, with no PyTorch op left in
the program for it (templates/batchnorm.cuh)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch
from support.emulated_programs import program_source

from tools.emulation.program import Unsupported, load_program

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "problems"


@pytest.fixture(autouse=True)
def _no_algorithm_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STITCHCUDA_CUDNN_CACHE", "off")


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["level2/4_Conv_BN_ReLU.py", "level2/34_BatchNorm_Of_Concat.py"])
def test_training_batch_norm_state_follows_pytorch_across_forwards(fixture: str) -> None:
    problem = FIXTURES / fixture
    source = program_source(problem)
    assert "num_batches_tracked.add_" not in source  # counted by our kernel, not a PyTorch op
    try:
        namespace = load_program(source)
    except Unsupported as exc:
        pytest.skip(str(exc))
    reference = runpy.run_path(str(problem))
    init = reference["get_init_inputs"]()
    torch.manual_seed(42)
    model = reference["Model"](*init)
    torch.manual_seed(42)
    ours = namespace["ModelNew"](*init)
    with torch.no_grad():
        for seed in (1, 2, 3):
            torch.manual_seed(seed)
            inputs = reference["get_inputs"]()
            model(*inputs)
            ours(*inputs)
    theirs = dict(model.named_buffers())
    mine = dict(ours.named_buffers())
    assert theirs.keys() == mine.keys() and any(k.endswith("num_batches_tracked") for k in theirs)
    for name, buffer in theirs.items():
        if name.endswith("num_batches_tracked"):
            assert int(buffer) == 3 and torch.equal(mine[name], buffer), name
        else:
            assert torch.allclose(mine[name], buffer, atol=1e-5, rtol=1e-5), name
    # eval mode reads the running statistics and counts nothing
    model.eval()
    ours.eval()
    with torch.no_grad():
        torch.manual_seed(4)
        inputs = reference["get_inputs"]()
        expected, got = model(*inputs), ours(*inputs)
    for e, g in zip(
        expected if isinstance(expected, tuple) else [expected],
        got if isinstance(got, tuple) else [got],
        strict=True,
    ):
        assert torch.allclose(g, e, atol=1e-4, rtol=1e-4)
    assert all(int(b) == 3 for k, b in ours.named_buffers() if k.endswith("num_batches_tracked"))
