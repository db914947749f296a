"""Problem loading: real suite files, whole suites, and one clear line for every malformed input."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import torch

from evals import suite_path
from tools.problem import ProblemError, TensorInfo, load_problem, load_suite, suite_files

BAD = Path(__file__).resolve().parents[1] / "fixtures" / "bad_problems"
SUITE = suite_path()


PROBLEM_TEMPLATE = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, steps):
{body}


def get_inputs():
    return [{inputs}, 3]


def get_init_inputs():
    return [{init}]
"""


def write_problem(
    folder: Path,
    name: str,
    body: str = "        return x * self.scale",
    inputs: str = "torch.rand(4, 8)",
    init: str = "2.0",
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(PROBLEM_TEMPLATE.format(body=body, inputs=inputs, init=init))
    return path


def problem_error(path: Path) -> str:
    """Load a problem that must fail; return its one-line message."""
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message


# ----------------------------------------------------------------------------------------------
# Loading real problems
# ----------------------------------------------------------------------------------------------


def test_suite_file_loads_with_specs_and_json_init_inputs() -> None:
    info = load_problem(SUITE / "level3" / "1_MLP.py")
    assert info.name == "1_MLP"
    assert info.level == "level3"
    assert info.path == (SUITE / "level3" / "1_MLP.py").resolve()
    assert "class Model(nn.Module)" in info.source
    assert info.init_inputs == [4096, [4096, 4096, 4096], 1024]
    assert info.inputs == [TensorInfo((512, 4096), "float32")]
    assert info.output == TensorInfo((512, 1024), "float32")
    assert info.shapes_from == "meta"


def test_two_input_problem_and_reduced_output_shape() -> None:
    info = load_problem(SUITE / "level2" / "3_Matmul_Scale_Softmax.py")
    assert info.init_inputs == [0.1]
    assert [spec.shape for spec in info.inputs] == [(32768, 1024), (1024, 1024)]
    assert info.output == TensorInfo((32768, 1024), "float32")
    reduced = load_problem(SUITE / "level1" / "7_MaxReduction.py")
    assert reduced.output == TensorInfo((128, 16384), "float32")


def test_tensor_info_matches_the_task_artifact() -> None:
    from graph.artifacts import TensorSpec

    info = load_problem(SUITE / "level1" / "8_Matmul.py")
    spec = TensorSpec.model_validate(info.output.to_json())
    assert spec.shape == [4096, 4096] and spec.dtype == "float32"
    assert info.input_bytes == 2 * 4096 * 4096 * 4


def test_huge_problem_loads_without_allocating(tmp_path: Path) -> None:
    # 16 Gi float32 elements: 64 GiB of input, more than this machine's memory.
    path = write_problem(tmp_path, "huge", inputs="torch.rand(16, 1024, 1024, 1024)")
    start = time.perf_counter()
    info = load_problem(path)
    assert time.perf_counter() - start < 10.0
    assert info.input_bytes == 64 * 2**30
    assert info.inputs == [TensorInfo((16, 1024, 1024, 1024), "float32"), None]
    assert info.output == TensorInfo((16, 1024, 1024, 1024), "float32")
    assert info.level is None
    assert info.shapes_from == "meta"


def test_op_without_meta_support_falls_back_to_a_cpu_run_and_keeps_the_rng(tmp_path: Path) -> None:
    body = "        return x[x > 0.5].sum(0, keepdim=True) * self.scale"  # boolean mask: no meta kernel
    path = write_problem(tmp_path, "masked", body=body)
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    info = load_problem(path)
    assert info.shapes_from == "cpu"
    assert info.output == TensorInfo((1,), "float32")
    assert torch.equal(torch.random.get_rng_state(), state)


def test_cpu_fallback_is_refused_for_huge_inputs(tmp_path: Path) -> None:
    body = "        return x[x > 0.5] * self.scale"
    path = write_problem(tmp_path, "masked_huge", body=body, inputs="torch.rand(2, 1024, 1024, 1024)")
    message = problem_error(path)
    assert str(path) in message and "no meta support" in message and "8.0 GiB" in message


def test_tuple_output_and_tuple_init_inputs(tmp_path: Path) -> None:
    path = write_problem(tmp_path, "pair", body="        return x * self.scale[0], x.sum(-1)", init="(2, 3)")
    info = load_problem(path)
    assert info.init_inputs == [[2, 3]]
    assert info.outputs == [TensorInfo((4, 8), "float32"), TensorInfo((4,), "float32")]
    assert info.output == info.outputs[0]


# ----------------------------------------------------------------------------------------------
# Suites
# ----------------------------------------------------------------------------------------------


def test_whole_builtin_suite_loads_sorted_by_level_and_number() -> None:
    problems = load_suite(SUITE)
    files = sorted(SUITE.glob("level*/*.py"))
    assert len(problems) == len(files) and len(problems) >= 24
    levels = [p.level for p in problems]
    assert levels == sorted(levels)
    for level in set(levels):
        numbers = [int(p.name.split("_", 1)[0]) for p in problems if p.level == level]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), level
    readme = (SUITE / "README.md").read_text()
    for info in problems:
        assert f"{info.level}/{info.name}" in readme, (
            f"{info.level}/{info.name} missing from the suite README"
        )
        assert info.shapes_from == "meta", info.name
        # Outputs are float32, or int64 indices (an argmax's, as KernelBench's arg-reduction problems).
        assert info.output is not None and info.output.dtype in ("float32", "int64"), info.name
        # Data is float32; masks and indices (a masked cumsum's mask, a loss's targets) are bool or int64.
        assert all(spec is not None and spec.dtype in ("float32", "bool", "int64") for spec in info.inputs)
        assert any(spec.dtype == "float32" for spec in info.inputs if spec is not None), info.name
        assert info.input_bytes <= 2**31, f"{info.name}: inputs over the 2 GiB cap"


def test_single_level_folder_and_ordering_with_ignored_files(tmp_path: Path) -> None:
    write_problem(tmp_path / "level2", "1_A")
    write_problem(tmp_path / "level1", "10_B")
    write_problem(tmp_path / "level1", "2_C")
    (tmp_path / "level1" / "notes.md").write_text("not a problem")
    (tmp_path / "level1" / "helpers.py").write_text("raise RuntimeError('never loaded')\n")
    (tmp_path / "other").mkdir()
    write_problem(tmp_path / "other", "1_Ignored", body="        raise RuntimeError('never loaded')")
    names = [(p.level, p.name) for p in load_suite(tmp_path)]
    assert names == [("level1", "2_C"), ("level1", "10_B"), ("level2", "1_A")]
    assert [p.name for p in load_suite(tmp_path / "level1")] == ["2_C", "10_B"]
    assert [f.name for f in suite_files(tmp_path)] == ["2_C.py", "10_B.py", "1_A.py"]


def test_malformed_problem_inside_a_suite_names_that_file(tmp_path: Path) -> None:
    write_problem(tmp_path / "level1", "1_Good")
    bad = tmp_path / "level1" / "2_Bad.py"
    shutil.copy(BAD / "forward_shape_mismatch.py", bad)
    with pytest.raises(ProblemError) as info:
        load_suite(tmp_path)
    assert str(info.value).startswith(f"{bad}: ")


def test_empty_and_missing_suites(tmp_path: Path) -> None:
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "readme.txt").write_text("nothing here")
    with pytest.raises(ProblemError, match="no problems found"):
        load_suite(tmp_path)
    with pytest.raises(ProblemError, match="no such directory"):
        load_suite(tmp_path / "absent")
    with pytest.raises(ProblemError, match="not a directory"):
        load_suite(BAD / "missing_model.py")


# ----------------------------------------------------------------------------------------------
# Malformed problems: one line naming the file and what is wrong
# ----------------------------------------------------------------------------------------------

BAD_CASES = [
    ("missing_model.py", "missing Model"),
    ("missing_get_inputs.py", "missing get_inputs"),
    ("missing_get_init_inputs.py", "missing get_init_inputs"),
    ("top_level_raises.py", "executing the file raised ValueError at line 4"),
    ("get_init_inputs_raises.py", "get_init_inputs() raised ValueError at line 19: features not configured"),
    (
        "get_init_inputs_not_list.py",
        "get_init_inputs() returned a value of type int, expected a list or tuple",
    ),
    ("get_init_inputs_tensor.py", "get_init_inputs()[0] is a Tensor"),
    ("model_init_raises.py", "Model(*get_init_inputs()) raised TypeError"),
    ("model_not_module.py", "Model does not subclass torch.nn.Module"),
    ("get_inputs_raises.py", "get_inputs() raised RuntimeError at line 11"),
    ("get_inputs_not_list.py", "get_inputs() returned a value of type Tensor, expected a list or tuple"),
    ("forward_shape_mismatch.py", "forward on the inputs from get_inputs() raised RuntimeError at line 14"),
    (
        "forward_returns_non_tensor.py",
        "forward returned a value of type dict, expected a tensor or a tuple of tensors",
    ),
    (
        "forward_returns_mixed_tuple.py",
        "forward returned a value of type tuple of Tensor, int, expected a tensor",
    ),
]


@pytest.mark.parametrize(("fixture", "expected"), BAD_CASES, ids=[case[0] for case in BAD_CASES])
def test_malformed_problem_gives_one_line_naming_the_file(fixture: str, expected: str) -> None:
    path = BAD / fixture
    message = problem_error(path)
    assert message.startswith(f"{path}: "), message
    assert expected in message, message


def test_shape_mismatch_message_carries_the_torch_reason() -> None:
    message = problem_error(BAD / "forward_shape_mismatch.py")
    reason = message.split("raised RuntimeError at line 14: ", 1)[1]
    assert "33" in reason and "32" in reason, message  # the mismatched dimensions are named


def test_syntax_error_reports_the_line(tmp_path: Path) -> None:
    path = tmp_path / "syntax.py"
    path.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return (x\n"
    )
    message = problem_error(path)
    assert message.startswith(f"{path}: syntax error at line 6"), message


def test_missing_file_directory_and_wrong_suffix(tmp_path: Path) -> None:
    assert problem_error(tmp_path / "absent.py") == f"{tmp_path / 'absent.py'}: no such file"
    assert "is a directory" in problem_error(tmp_path)
    assert "not a .py file" in problem_error(BAD / "not_python.txt")


def test_multi_line_exception_messages_are_cut_to_one_line(tmp_path: Path) -> None:
    body = "        raise RuntimeError('first line of the reason\\nsecond line\\nthird line')"
    message = problem_error(write_problem(tmp_path, "multiline", body=body))
    assert message.endswith("RuntimeError at line 11: first line of the reason"), message
