"""The convolution family on the CPU: classification, schedule, generated code, hack checks, repair.

Numerics need cuDNN on a GPU (tests/gpu/test_conv_gpu.py); the nvcc build of a program holding
every conv kind is in test_codegen_build.py.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from codegen.emit.assemble import Options, assemble
from codegen.emit.conv_runtime import _stitch_conv_out_size
from codegen.policy import OfflinePolicy
from codegen.schedule.conv import conv_folds
from codegen.schedule.plan import analyse
from graph.artifacts import Feedback, Task
from tools.checks import static_findings, verdict

FIXTURES = Path(__file__).parents[1] / "fixtures" / "problems"
SUITE = Path(__file__).parents[2] / "evals" / "suite"

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = {module}

    def forward(self, x{extra_params}):
        return {body}


def get_inputs():
    return [torch.rand{shape}{extra_inputs}]


def get_init_inputs():
    return []
"""

# (module constructor, input shape): every kind of convolution KernelBench uses.
KINDS = {
    "conv1d": ("nn.Conv1d(6, 8, 5, stride=2, padding=1)", (2, 6, 33)),
    "conv1d dilated no bias": ("nn.Conv1d(6, 8, 3, dilation=3, bias=False)", (2, 6, 40)),
    "conv2d square": ("nn.Conv2d(3, 8, 3, padding=1)", (2, 3, 16, 16)),
    "conv2d asymmetric": ("nn.Conv2d(4, 8, (3, 5), stride=(1, 2), padding=(1, 2))", (2, 4, 13, 19)),
    "conv2d depthwise": ("nn.Conv2d(8, 8, 3, padding=1, groups=8)", (2, 8, 15, 15)),
    "conv2d grouped": ("nn.Conv2d(8, 12, 3, groups=4, bias=False)", (2, 8, 11, 9)),
    "conv2d same": ("nn.Conv2d(4, 4, (5, 3), padding='same', dilation=(1, 2))", (2, 4, 12, 10)),
    "conv2d valid": ("nn.Conv2d(4, 4, 3, padding='valid')", (2, 4, 12, 10)),
    "conv3d": ("nn.Conv3d(3, 6, (3, 5, 3), stride=(1, 2, 2), padding=(1, 2, 0))", (2, 3, 6, 14, 9)),
    "conv_transpose1d": ("nn.ConvTranspose1d(8, 4, 4, stride=3, padding=1, output_padding=2)", (2, 8, 9)),
    "conv_transpose2d": (
        "nn.ConvTranspose2d(8, 6, (3, 4), stride=2, padding=(1, 0), groups=2)",
        (2, 8, 7, 5),
    ),
    "conv_transpose2d dilated": (
        "nn.ConvTranspose2d(4, 4, 3, dilation=2, output_padding=1, stride=2)",
        (2, 4, 6, 6),
    ),
    "conv_transpose3d": (
        "nn.ConvTranspose3d(4, 2, 3, stride=2, padding=1, output_padding=1)",
        (2, 4, 3, 5, 4),
    ),
}


def problem(module: str, shape: tuple[int, ...], body: str = "self.conv(x)", residual: bool = False) -> str:
    extra_params, extra_inputs = ("", "")
    if residual:
        extra_params, extra_inputs = ", r", f", torch.rand{tuple(out_shape(module, shape))}"
    return PROBLEM.format(
        module=module, shape=shape, body=body, extra_params=extra_params, extra_inputs=extra_inputs
    )


def out_shape(module: str, shape: tuple[int, ...]) -> torch.Size:
    with torch.device("meta"):
        return eval(module, {"nn": nn})(torch.empty(shape)).shape


def task(source: str, name: str = "conv") -> Task:
    return Task(name=name, path=f"{name}.py", source=source)


def only_group(source: str) -> Any:
    analysis = analyse(task(source))
    (group,) = analysis.groups
    return analysis, group


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_conv_kind_is_one_covered_conv_group(kind: str) -> None:
    module, shape = KINDS[kind]
    analysis, group = only_group(problem(module, shape))
    assert group.kind == "conv" and group.anchor.family == "conv"
    params = group.anchor.args["params"]
    built = eval(module, {"nn": nn})
    assert params.transposed == kind.startswith("conv_transpose")
    assert params.stride == built.stride and params.dilation == built.dilation
    assert params.groups == built.groups
    if isinstance(built.padding, tuple):
        assert params.padding == built.padding
    plan = OfflinePolicy().plan(task(problem(module, shape)), None)
    assert plan.uncovered_ops == [] and plan.groups[0].covered
    (op,) = plan.ops
    weight_per_point = built.weight[0].numel()  # (C/groups or Cout/groups) x kernel volume
    points = (
        torch.Size(shape).numel() if params.transposed else out_shape(module, shape).numel()
    )  # transposed: every input element meets the kernel
    bias = out_shape(module, shape).numel() if built.bias is not None else 0
    assert op.flops == 2 * points * weight_per_point + bias


@pytest.mark.parametrize("kind", list(KINDS))
def test_runtime_output_size_matches_pytorch(kind: str) -> None:
    """The generated program computes output shapes itself (it allocates before calling cuDNN)."""
    module, shape = KINDS[kind]
    _, group = only_group(problem(module, shape))
    params = group.anchor.args["params"]
    weight = eval(module, {"nn": nn}).weight
    sizes = [
        _stitch_conv_out_size(
            shape[2 + i],
            weight.shape[2 + i],
            params.padding[i],
            params.stride[i],
            params.dilation[i],
            params.transposed,
            params.output_padding[i],
        )
        for i in range(params.nd)
    ]
    assert sizes == list(out_shape(module, shape)[2:])


FUNCTIONAL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 2, 3, 3))
        self.wt = nn.Parameter(torch.randn(8, 3, 2, 2))

    def forward(self, x):
        y = F.conv2d(x, self.w, None, 2, 1, 1, 4)
        return F.conv_transpose2d(y, self.wt, stride=2, groups=2, dilation=1)


def get_inputs():
    return [torch.rand(2, 8, 10, 10)]


def get_init_inputs():
    return []
"""


def test_functional_convs_bind_pytorch_argument_order() -> None:
    analysis = analyse(task(FUNCTIONAL))
    anchors = [g.anchor for g in analysis.groups]
    assert all(a is not None for a in anchors)
    first, second = (a.args["params"] for a in anchors if a is not None)
    assert (first.stride, first.padding, first.groups, first.transposed) == ((2, 2), (1, 1), 4, False)
    assert (second.stride, second.groups, second.dilation, second.transposed) == ((2, 2), 2, (1, 1), True)


@pytest.mark.parametrize(
    ("module", "shape", "reason"),
    [
        ("nn.Conv2d(3, 4, 3, padding=1, padding_mode='reflect')", (2, 3, 8, 8), "padding_mode"),
        ("nn.Conv2d(3, 4, 4, padding='same')", (2, 3, 8, 8), "one side more"),
        ("nn.Conv2d(3, 4, 3)", (3, 8, 8), "batched"),
        (
            "nn.ConvTranspose2d(3, 4, 3, dilation=3, output_padding=1)",
            (2, 3, 8, 8),
            "smaller than the stride",
        ),
    ],
)
def test_what_cudnn_cannot_run_stays_pytorch_with_a_reason(
    module: str, shape: tuple[int, ...], reason: str
) -> None:
    plan = OfflinePolicy().plan(task(problem(module, shape)), None)
    (group,) = plan.groups
    assert not group.covered and reason in group.reason


def test_conv_transpose_with_output_size_stays_pytorch() -> None:
    source = problem(
        "nn.ConvTranspose2d(4, 4, 3, stride=2)", (2, 4, 5, 5), "self.conv(x, output_size=[12, 12])"
    )
    (group,) = OfflinePolicy().plan(task(source), None).groups
    assert not group.covered and "output_size" in group.reason


CONV2D = "nn.Conv2d(4, 8, 3, padding=1)"
SHAPE = (2, 4, 9, 9)


@pytest.mark.parametrize(
    ("body", "residual", "launcher", "rest", "template"),
    [
        ("self.conv(x)", False, ("bias",), 0, "cudnn_conv+bias_act"),
        ("torch.relu(self.conv(x))", False, ("bias", "relu"), 0, "cudnn_conv+bias_act"),
        ("torch.relu(self.conv(x) + r)", True, ("bias", "residual", "relu"), 0, "cudnn_conv+bias_act"),
        ("r + self.conv(x)", True, ("bias", "residual"), 0, "cudnn_conv+bias_act"),
        ("F.gelu(self.conv(x))", False, (), 1, "cudnn_conv+ew_epilogue"),
        ("torch.relu(self.conv(x)) * 2.0", False, (), 2, "cudnn_conv+ew_epilogue"),
        ("torch.relu(self.conv(x)) + r", True, (), 2, "cudnn_conv+ew_epilogue"),
    ],
)
def test_epilogue_is_folded_into_the_launcher_or_one_kernel(
    body: str, residual: bool, launcher: tuple[str, ...], rest: int, template: str
) -> None:
    source = problem(CONV2D, SHAPE, body, residual)
    analysis, group = only_group(source)
    fold = conv_folds(analysis.classifier, group)
    folded = tuple(
        n for n, on in (("bias", fold.bias), ("residual", fold.residual), ("relu", fold.relu)) if on
    )
    assert folded == launcher and fold.rest == rest
    program = assemble(analysis, Options())
    assert program.templates == {"g1": template}
    call = next(line for line in program.source.splitlines() if "out = _stitch_conv(" in line)
    args = [a.strip() for a in call.split("_stitch_conv(", 1)[1].rstrip(")").split(",")]
    assert (args[2] != "None") == ("bias" in launcher), "the bias goes to cuDNN or to the epilogue kernel"
    assert (args[3] != "None") == ("residual" in launcher)
    assert args[-1] == ("1" if "relu" in launcher else "0")
    assert ("StitchEw_" in program.cuda_src) == (rest > 0)


def test_split_level_moves_the_folded_epilogue_into_our_kernel() -> None:
    source = problem(CONV2D, SHAPE, "torch.relu(self.conv(x))")
    analysis, group = only_group(source)
    fused = assemble(analysis, Options())
    split = assemble(analysis, Options(levels={"g1": 1}))
    assert fused.templates == {"g1": "cudnn_conv+bias_act"}
    assert split.templates == {"g1": "cudnn_conv+ew_epilogue"}
    assert "_stitch_conv(a0, a1, None, None," in split.source and "bias_c = " in split.source


def test_a_cudnn_failure_demotes_the_conv_group() -> None:
    policy = OfflinePolicy()
    t = task(problem(CONV2D, SHAPE, "torch.relu(self.conv(x))"))
    plan = policy.plan(t, None)
    candidate = policy.write(t, plan, 1)
    error = "RuntimeError: stitch group g1 (conv) failed: cuDNN status 3 (cudnnStatus_t)"
    first = policy.revise(
        t, plan, candidate, Feedback(kind="runtime_error", summary=error, evidence=""), "fix", 2
    )
    assert first.meta["demotions"][0]["to"] == "split"
    second = policy.revise(
        t, plan, first, Feedback(kind="runtime_error", summary=error, evidence=""), "fix", 3
    )
    assert second.meta["templates"] == {"g1": "pytorch"}


def families_program() -> str:
    path = FIXTURES / "level2" / "9_Conv_Families.py"
    policy = OfflinePolicy()
    t = Task(name=path.stem, path=str(path), source=path.read_text())
    return policy.write(t, policy.plan(t, None), 1).source


def test_conv_programs_pass_the_static_hack_checks() -> None:
    source = families_program()
    findings = static_findings(source)
    assert [f for f in findings if f["severity"] != "info"] == [], findings
    assert verdict(findings) == "clean"


def test_conv_programs_follow_the_program_format() -> None:
    source = families_program()
    cuda = source.split("CUDA_SRC = r'''", 1)[1].split("'''", 1)[0]
    assert "#include <cudnn.h>" in cuda and "torch/" not in cuda and "ATen" not in cuda
    assert "use_cudnn=True" in source
    assert "torch.backends.cudnn.allow_tf32" in source, "the math mode follows PyTorch's setting per call"
    for name in ("conv2d(", "conv1d(", "conv3d(", "conv_transpose"):
        assert f"F.{name}" not in source.split("class ModelNew", 1)[1], "no call back into PyTorch"
    tree = ast.parse(source)
    assert any(
        isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "_STITCH_CONV_WORKSPACES" for n in tree.body
    )


@pytest.mark.skipif(not SUITE.is_dir(), reason="evals/suite not present")
def test_every_suite_conv_problem_is_fully_covered() -> None:
    conv_files = [p for p in sorted(SUITE.glob("level[12]/*.py")) if "Conv" in p.stem]
    assert len(conv_files) >= 20
    policy = OfflinePolicy()
    for path in conv_files:
        plan = policy.plan(Task(name=path.stem, path=str(path), source=path.read_text()), None)
        assert plan.traced, path.stem
        kinds = {g.kind for g in plan.groups}
        assert "conv" in kinds and "reference" not in kinds, (path.stem, plan.uncovered_ops)


def test_conv_flops_are_not_counted_for_functional_weights_twice() -> None:
    """Functional convs count 2 x N x Cout x out x (Cin/groups) x kernel like the modules."""
    plan = OfflinePolicy().plan(task(FUNCTIONAL), None)
    first = plan.ops[0]
    out = F.conv2d(
        torch.empty(2, 8, 10, 10, device="meta"), torch.empty(8, 2, 3, 3, device="meta"), None, 2, 1, 1, 4
    )
    assert first.flops == 2 * out.numel() * 2 * 9


@pytest.mark.parametrize(
    ("module", "shape", "pointwise"),
    [
        ("nn.Conv2d(16, 32, 1)", (2, 16, 9, 7), True),
        ("nn.Conv1d(16, 32, 1, bias=False)", (2, 16, 33), True),
        ("nn.Conv3d(4, 8, 1)", (2, 4, 3, 5, 6), True),
        ("nn.Conv2d(16, 32, 1, stride=2)", (2, 16, 9, 7), False),
        ("nn.Conv2d(16, 32, 1, padding=1)", (2, 16, 9, 7), False),
        ("nn.Conv2d(16, 32, 1, groups=2)", (2, 16, 9, 7), False),
        ("nn.Conv2d(16, 32, 3)", (2, 16, 9, 7), False),
        ("nn.ConvTranspose2d(16, 32, 1)", (2, 16, 9, 7), False),
    ],
)
def test_pointwise_convs_bring_the_gemm_library_for_the_search(
    module: str, shape: tuple[int, ...], pointwise: bool
) -> None:
    """A 1x1, stride-1, unpadded, one-group forward conv is a GEMM per item: its program carries the
    cuBLASLt library (and links it) so the launcher can time that GEMM beside cuDNN's algorithms."""
    source = assemble(analyse(task(problem(module, shape))), Options()).source
    cuda = source.split("CUDA_SRC = r'''", 1)[1].split("'''", 1)[0]
    assert ("// lib gemm" in cuda) is pointwise
    assert ("use_cublas=True" in source) is pointwise
    assert "stitch_conv(" in cuda and "STITCH_GEMM_CONV_ALGO" in cuda
