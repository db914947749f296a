"""Models built on the host before the device lock equal those built the old way, under the lock."""

from __future__ import annotations

import types

import torch
from torch import nn

from tools.worker.loading import construct, construct_on_host


class Model(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class ModelNew(Model):
    pass


def _problem(init: list[object]) -> types.ModuleType:
    module = types.ModuleType("problem")
    module.Model = Model  # type: ignore[attr-defined]
    module.get_init_inputs = lambda: init  # type: ignore[attr-defined]
    return module


def test_host_built_models_move_with_the_same_seeded_weights() -> None:
    problem, candidate = _problem([8]), types.ModuleType("candidate")
    candidate.ModelNew = ModelNew  # type: ignore[attr-defined]
    direct = construct(problem, candidate, torch.device("cpu"), seed=42)
    built = construct_on_host(problem, candidate, seed=42)
    assert built is not None
    moved = construct(problem, candidate, torch.device("cpu"), seed=42, built=built)
    for a, b in zip(direct, moved, strict=True):
        assert torch.equal(a.fc.weight, b.fc.weight) and torch.equal(a.fc.bias, b.fc.bias)
    assert torch.equal(moved[0].fc.weight, moved[1].fc.weight)  # KernelBench's seeding: the same init


def test_tensor_init_inputs_keep_the_models_on_the_device_path() -> None:
    candidate = types.ModuleType("candidate")
    candidate.ModelNew = ModelNew  # type: ignore[attr-defined]
    assert construct_on_host(_problem([torch.tensor(8)]), candidate, seed=42) is None
