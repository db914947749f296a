"""Pooling and normalisation classification on the CPU (issue 19, pool helper).

Global adaptive pools become covered reductions; windowed pools are one covered pool group with the
epilogue; BatchNorm1d/3d and group/instance norm are covered. The nvcc build of a program holding every
kind is in test_codegen_build.py (fixture level2/11_Pool_Families); numerics in tests/gpu/test_pool_gpu.py.
"""

from __future__ import annotations

import pytest

from codegen.frontend.pool_ops import pool_out_size
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import analyse
from graph.artifacts import Task

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = {module}

    def forward(self, x):
        return torch.relu(self.op(x))


def get_inputs():
    return [torch.rand{shape}]


def get_init_inputs():
    return []
"""


def plan_of(module: str, shape: tuple[int, ...]):  # noqa: ANN201 - a graph.artifacts Plan
    source = PROBLEM.format(module=module, shape=shape)
    return OfflinePolicy().plan(Task(name="pool", path="pool.py", source=source), None), source


@pytest.mark.parametrize(
    ("module", "shape", "op"),
    [
        ("nn.AdaptiveAvgPool2d(1)", (2, 8, 9, 7), "mean"),
        ("nn.AdaptiveAvgPool1d(1)", (2, 8, 33), "mean"),
        ("nn.AdaptiveMaxPool3d((1, 1, 1))", (2, 4, 3, 5, 6), "amax"),
    ],
)
def test_global_adaptive_pool_is_a_covered_reduction(module: str, shape: tuple[int, ...], op: str) -> None:
    plan, source = plan_of(module, shape)
    assert plan.uncovered_ops == []
    analysis = analyse(Task(name="pool", path="pool.py", source=source))
    anchor = analysis.groups[0].anchor
    assert anchor.family == "reduction" and anchor.op == op
    assert anchor.args["dims"] == list(range(len(shape) - (len(shape) - 2), len(shape)))
    assert anchor.args["keepdim"] is True


@pytest.mark.parametrize(
    ("module", "shape"), [("nn.BatchNorm1d(8)", (4, 8, 17)), ("nn.BatchNorm3d(4)", (2, 4, 3, 5, 6))]
)
def test_batch_norm_1d_and_3d_are_covered(module: str, shape: tuple[int, ...]) -> None:
    plan, _ = plan_of(module, shape)
    assert plan.uncovered_ops == []


@pytest.mark.parametrize(
    ("module", "shape"),
    [
        ("nn.GroupNorm(2, 8)", (2, 8, 5, 5)),
        ("nn.InstanceNorm2d(8)", (2, 8, 5, 5)),
    ],
)
def test_group_and_instance_norm_are_covered(module: str, shape: tuple[int, ...]) -> None:
    plan, _ = plan_of(module, shape)
    assert plan.uncovered_ops == []
    assert plan.groups[0].template == "gn_stats+ew_epilogue"  # as the program names it


@pytest.mark.parametrize(
    ("module", "shape", "template"),
    [
        ("nn.MaxPool3d(3, 2, 1, ceil_mode=True)", (2, 4, 7, 9, 8), "pool_max+epilogue"),
        (
            "nn.AvgPool2d(3, 2, 1, count_include_pad=False, divisor_override=None)",
            (2, 4, 9, 9),
            "pool_avg+epilogue",
        ),
        ("nn.MaxPool1d(4, 2, 1, dilation=2)", (2, 4, 23), "pool_max+epilogue"),
        ("nn.AdaptiveAvgPool2d((3, 5))", (2, 4, 9, 11), "pool_adaptive_avg+epilogue"),
    ],
)
def test_windowed_pools_are_one_covered_group_with_the_epilogue(
    module: str, shape: tuple[int, ...], template: str
) -> None:
    plan, _ = plan_of(module, shape)
    assert plan.uncovered_ops == []
    assert [g.template for g in plan.groups] == [template]


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding", "dilation"), [(17, 3, 2, 1, 1), (10, 2, 3, 0, 2), (8, 4, 4, 2, 1)]
)
def test_pool_out_size_matches_pytorch(
    size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool
) -> None:
    import torch
    import torch.nn.functional as F

    y = F.max_pool1d(torch.zeros(1, 1, size), kernel, stride, padding, dilation, ceil_mode)
    assert pool_out_size(size, kernel, stride, padding, dilation, ceil_mode) == y.shape[-1]
