"""Common ops beyond KernelBench's levels 1-3 that user programs bring (issue 19, point 4).

- `torch.where` with a comparison as its condition: one elementwise op, the comparison absorbed;
  the planner test checks each spelling (and what stays PyTorch), the expression test compiles the
  generated C with g++ and compares it with torch.where on values with NaN and ties;
- `erfc` and `logaddexp` as elementwise ops, their C expressions checked the same way (infinities,
  NaN, large arguments where 1 - erf would lose every digit);
- GLU, cosine similarity, pixel (un)shuffle and nearest upsampling written out while tracing: the
  traced graph against PyTorch in float64, and the variants not written out left as one call.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
import torch
from support.host_emulation import build_emulator
from support.traced_numerics import HEADER, assert_graph_matches_in_float64, fully_covered_plan

from codegen.emit.assemble import Options, assemble
from codegen.emit.expressions import op_expr
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import analyse
from graph.artifacts import Task

PROBLEM = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x, y, b, m):
            a = torch.where(x > 0.5, x, y * 2)       # tensor branches
            c = torch.where(x < b, 1.0, a)           # a number, a broadcast bound
            d = a.where(y >= x, 0.25)                # the method spelling
            kept = torch.where(m, x, y)              # a bool tensor condition: PyTorch
            return torch.relu(c + d) + kept

    def get_inputs():
        return [torch.rand(4, 8), torch.rand(4, 8), torch.rand(8), torch.rand(4, 8) > 0.5]

    def get_init_inputs():
        return []
    """
)


def test_where_of_a_comparison_is_one_elementwise_op_and_other_conditions_stay_pytorch() -> None:
    analysis = analyse(Task(name="where", path="where.py", source=PROBLEM))
    wheres = [s for s in analysis.specs if s.op == "where_cmp"]
    assert len(wheres) == 3
    compared = {s.node: s for s in analysis.specs if s.op in ("gt", "lt", "ge")}
    assert {n for w in wheres for n in w.args["lead"]} == set(compared)  # each absorbed by its where
    assert all(s.args.get("absorbed") for s in compared.values())
    program = assemble(analysis, Options())
    assert program.uncovered_ops == ["where"]  # the bool-tensor condition
    covered = [g for g, t in program.templates.items() if t.startswith("ew")]
    assert len(covered) == 2  # the three where_cmp with their arithmetic, then the add after PyTorch's where
    assert "? " in program.cuda_src


@pytest.fixture(scope="module")
def where_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = []
    for cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
        expr = op_expr("where_cmp", ["x", "y", "a", "b"], {"cmp": cmp})
        lines.append(f'  if (cmp == "{cmp}") return {expr};')
    source = textwrap.dedent(
        """
        #include <cmath>
        #include <cstdio>
        #include <cstdlib>
        #include <string>
        static float pick(const std::string& cmp, float x, float y, float a, float b) {
        @BODY@
          return -1.0f;
        }
        int main(int argc, char** argv) {
          const std::string cmp = argv[1];
          for (int i = 2; i + 3 < argc; i += 4)
            printf("%.9g\\n", pick(cmp, strtof(argv[i], 0), strtof(argv[i + 1], 0), strtof(argv[i + 2], 0),
                                   strtof(argv[i + 3], 0)));
        }
        """
    ).replace("@BODY@", "\n".join(lines))
    return build_emulator(tmp_path_factory.mktemp("where"), source)


@pytest.mark.parametrize("cmp", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_the_where_expression_matches_torch_where(where_binary: Path, cmp: str) -> None:
    a = torch.tensor([0.0, 1.0, 2.0, float("nan"), 3.0, -1.0])
    b = torch.tensor([0.0, 2.0, 1.0, 1.0, float("nan"), -1.0])
    x, y = torch.arange(6.0) + 10, torch.arange(6.0) + 20
    args = [f"{v:.9g}" for row in zip(x, y, a, b, strict=True) for v in row]
    out = subprocess.run([str(where_binary), cmp, *args], check=True, capture_output=True, text=True).stdout
    got = torch.tensor([float(v) for v in out.split()])
    assert torch.equal(got, torch.where(getattr(torch, cmp)(a, b), x, y))


@pytest.fixture(scope="module")
def math_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    erfc = op_expr("erfc", ["a"], {})
    logaddexp = op_expr("logaddexp", ["a", "b"], {})
    source = textwrap.dedent(
        f"""
        #include <cmath>
        #include <cstdio>
        #include <cstdlib>
        using std::isinf;
        int main(int argc, char** argv) {{
          for (int i = 1; i + 1 < argc; i += 2) {{
            const float a = strtof(argv[i], 0), b = strtof(argv[i + 1], 0);
            printf("%.9g %.9g\\n", {erfc}, {logaddexp});
          }}
        }}
        """
    )
    return build_emulator(tmp_path_factory.mktemp("math"), source)


def test_erfc_and_logaddexp_expressions_match_pytorch(math_binary: Path) -> None:
    inf, nan = float("inf"), float("nan")
    a = torch.tensor([0.0, 5.0, 9.0, -3.0, 1.0, -inf, inf, inf, nan, 2.0, 30.0])
    b = torch.tensor([0.0, 1.0, -9.0, -3.5, 100.0, -inf, inf, -inf, 1.0, nan, -30.0])
    args = [f"{v:.9g}" for pair in zip(a, b, strict=True) for v in pair]
    out = subprocess.run([str(math_binary), *args], check=True, capture_output=True, text=True).stdout
    got = torch.tensor([[float(v) for v in line.split()] for line in out.splitlines()])
    torch.testing.assert_close(got[:, 0], torch.erfc(a), rtol=1e-6, atol=0.0, equal_nan=True)
    torch.testing.assert_close(got[:, 1], torch.logaddexp(a, b), rtol=1e-6, atol=0.0, equal_nan=True)
    assert got[1, 0] > 1e-12  # erfc(5): 1.5e-12, where 1 - erf(5) is 0 in float32


SHAPES = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.glu = nn.GLU(dim=1)
        self.cos = nn.CosineSimilarity(dim=2, eps=1e-6)
        self.shuffle = nn.PixelShuffle(2)
        self.unshuffle = nn.PixelUnshuffle(2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x, y, z):
        return (
            F.glu(x, dim=-1),
            self.glu(x),
            F.cosine_similarity(x, y, dim=1),
            self.cos(x, y),
            self.shuffle(z),
            self.unshuffle(z),
            self.up(z),
            F.interpolate(z, size=(12, 12), mode="nearest"),
            F.interpolate(x, scale_factor=3),
            torch.logaddexp(x, y) + torch.erfc(y) + x.erfc(),
        )


def get_inputs():
    x = torch.randn(2, 6, 8, 10)
    x[0, 0, 0, :] = 0.0  # a zero vector: the eps clamp decides its cosine
    return [x, torch.randn(2, 6, 8, 10) * 3, torch.randn(2, 8, 6, 4)]


def get_init_inputs():
    return []
"""


def test_glu_cosine_similarity_pixel_shuffle_and_nearest_upsampling_are_written_out_exactly() -> None:
    task = Task(name="shapes", path="<memory>", source=HEADER + SHAPES)
    plan = fully_covered_plan(task)
    assert {"erfc", "logaddexp", "sigmoid", "reshape", "sum"} <= set(plan.covered_ops)
    assert_graph_matches_in_float64(task, 10, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        ("F.interpolate(x, scale_factor=1.5)", "interpolate"),  # not a whole factor
        ("F.interpolate(x, scale_factor=2, mode='bilinear')", "interpolate"),  # another mode
        ("F.glu(x[:, :, :5], dim=2)", "glu"),  # an odd size: PyTorch raises, as it would
        ("F.pixel_shuffle(x, 3)", "pixel_shuffle"),  # channels not a multiple of 9: PyTorch raises
    ],
)
def test_shape_variants_not_written_out_stay_one_named_call(call: str, name: str) -> None:
    source = HEADER + textwrap.dedent(
        f"""
        class Model(nn.Module):
            def forward(self, x):
                return {call}


        def get_inputs():
            return [torch.rand(2, 4, 6, 6)]


        def get_init_inputs():
            return []
        """
    )
    plan = OfflinePolicy().plan(Task(name="variant", path="<memory>", source=source), None)
    assert name in plan.uncovered_ops or not plan.traced, (plan.uncovered_ops, plan.traced)
