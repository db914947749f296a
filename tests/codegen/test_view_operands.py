"""Full operands read through their strides (codegen/emit/chain.py `Chain.views`): a transposed,
permuted or sliced input of an elementwise chain or a row kernel is addressed in place instead of
being copied contiguous first.

The offset math (templates/common.cuh `stitch_view_offset`) runs on the CPU through nvcc's host
compiler against real torch views; the generated programs are checked for what they read and built
with nvcc once. Numerics on the GPU: the `copy` family's fixture (tests/gpu/test_copy_gpu.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from support.nvcc_build import NVCC, build_and_load

from codegen.emit.assemble import Options, assemble
from codegen.emit.cuda_unit import TEMPLATE_DIR
from codegen.emit.runtime import _stitch_view
from codegen.schedule.plan import analyse
from graph.artifacts import Task

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return {body}


def get_inputs():
    return [torch.rand(2, 8, 12), torch.rand(2, 12, 8)]


def get_init_inputs():
    return []
"""

EMULATION = r"""
#include <cstdio>
#include <cstdlib>
#include "common.cuh"

int main(int argc, char** argv) {  // n desc z0..z5 s0..s5: the offsets of elements 0..n-1
  const int64_t n = atoll(argv[1]);
  int64_t v[13];
  for (int i = 0; i < 13; ++i) v[i] = atoll(argv[2 + i]);
  for (int64_t e = 0; e < n; ++e) {
    printf("%lld\n", (long long)stitch_view_offset(e, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9],
                                                   v[10], v[11], v[12]));
  }
  return 0;
}
"""


def task(body: str) -> Task:
    return Task(name="view_case", path="view_case.py", source=PROBLEM.format(body=body))


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if NVCC is None:
        pytest.skip("nvcc not installed")
    folder = tmp_path_factory.mktemp("view_emulation")
    (folder / "main.cu").write_text(EMULATION)
    binary = folder / "emulate"
    cmd = [str(NVCC), "-std=c++17", "-w", f"-I{TEMPLATE_DIR}", str(folder / "main.cu"), "-o", str(binary)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return binary


def _base() -> torch.Tensor:
    return torch.arange(3 * 4 * 5 * 8 * 2 * 3 * 2, dtype=torch.float32).view(3, 4, 5, 8, 2, 3, 2)


@pytest.mark.parametrize(
    ("make", "dims", "rows4"),
    [
        (lambda b: b, 1, True),  # contiguous: one dim, offset e
        (lambda b: b.flatten(3).transpose(1, 2), 4, True),  # rows stay whole float4s
        (lambda b: b.flatten(3).permute(2, 0, 3, 1), 4, False),
        (lambda b: b.flatten(4)[:, 1:3, :, 2:6], 3, True),  # a slice: its rows merge, whole float4s
        (lambda b: b.flatten(4)[:, :, :, :, ::2], 1, False),  # every other element: one dim, stride 2
        (lambda b: b.flatten(3)[:1, :1].expand(3, 4, 5, 96), 2, True),  # zero strides
        (lambda b: b.unsqueeze(2).transpose(0, 3), 4, True),  # size-1 dims dropped
    ],
)
def test_the_offsets_address_the_view_element_by_element(
    emulator: Path, make: Any, dims: int, rows4: bool
) -> None:
    base = _base()
    view = make(base)
    t, desc = _stitch_view(view)
    assert t.data_ptr() == view.data_ptr()  # read in place
    assert desc[0] & 15 == dims and bool(desc[0] & 32) is rows4 and desc[0] & 16
    proc = subprocess.run(
        [str(emulator), str(view.numel()), *map(str, desc)], check=True, capture_output=True, text=True
    )
    offsets = torch.tensor([int(v) for v in proc.stdout.split()])
    assert torch.equal(base.reshape(-1)[offsets + view.storage_offset()], view.reshape(-1))


def test_a_layout_of_seven_unmergeable_dims_is_copied_first() -> None:
    base = torch.arange(2 * 3 * 2 * 3 * 2 * 3 * 2, dtype=torch.float32).view(2, 3, 2, 3, 2, 3, 2)
    view = base.permute(6, 5, 4, 3, 2, 1, 0)
    t, desc = _stitch_view(view)
    assert t.is_contiguous() and torch.equal(t, view)
    assert desc[0] & 15 == 1 and desc[1] == view.numel() and desc[7] == 1


def test_transposed_inputs_of_chains_and_rows_are_read_in_place() -> None:
    body = (
        "x.transpose(1, 2) * 2.0 + y, torch.softmax(x.transpose(0, 1), -1), torch.relu(y) - x.transpose(1, 2)"
    )
    program = assemble(analyse(task(body)), Options())
    assert program.uncovered_ops == []
    source = program.source
    assert source.count("= _stitch_view(") == 3 and "def _stitch_view(" in source  # three readers
    assert "f1 = a1.contiguous()" in source  # y itself is contiguous: read as before
    assert "stitch_view_ld4(f0" in program.cuda_src and "f0[stitch_view_offset(" in program.cuda_src


def test_a_row_kernel_copies_a_view_whose_rows_are_strided() -> None:
    """A softmax loads its row more than once: strided rows are copied contiguous first, as before."""
    program = assemble(analyse(task("torch.softmax(x.transpose(1, 2), -1)")), Options())
    assert "_stitch_view(" not in program.source and "p_f0 = a0.contiguous()" in program.source


def test_contiguous_operands_keep_the_plain_path() -> None:
    program = assemble(analyse(task("torch.softmax(x * 2.0, -1), y + 1.0")), Options())
    assert "_stitch_view(" not in program.source and "stitch_view_ld4(f" not in program.cuda_src


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_a_program_with_view_operands_builds_with_nvcc(tmp_path: Path) -> None:
    body = "x.transpose(1, 2) * 2.0 + y, torch.softmax(x.transpose(1, 2), -1), x.transpose(1, 2).sum(-1)"
    problem = tmp_path / "view_case.py"
    problem.write_text(PROBLEM.format(body=body))
    program = tmp_path / "view_solution.py"
    program.write_text(assemble(analyse(task(body)), Options()).source)
    launchers = build_and_load(program, problem)
    assert any(n.startswith("ew_") for n in launchers) and any(n.startswith("softmax_") for n in launchers)
