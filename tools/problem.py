"""Loading KernelBench-format problem files and suites.

A problem is trusted user code (the reference), so it may be executed in the graph's process;
candidates never are. Every failure is a `ProblemError` whose message is one line naming the file
and what is wrong with it.

Shapes are found without allocating data: the problem runs under `torch.device("meta")`, where
factory functions (`torch.rand`, parameter initialisers) make meta tensors, so a problem whose
inputs would need 64 GB loads in milliseconds. Only an op without meta support (a data-dependent
`nonzero`, an `.item()`) makes the loader fall back to one real CPU run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tools.meta_rnn import MetaRnnShapes
from tools.worker.loading import ProblemError, error_line, exec_problem_source, one_line

LEVEL_NAMES = ("level1", "level2", "level3", "level4")
PROBLEM_FILE_PATTERN = re.compile(r"^(\d+)_(.+)\.py$")
CPU_FALLBACK_LIMIT_BYTES = 4 << 30
"""A real CPU run (for ops without meta support) is refused when the inputs exceed this."""


def problem_name_from_path(path: str | Path) -> str:
    return Path(path).stem


@dataclass(frozen=True)
class TensorInfo:
    """Shape and dtype of one tensor, found without its data."""

    shape: tuple[int, ...]
    dtype: str  # torch dtype name without the "torch." prefix, e.g. "float32"

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorInfo:
        return cls(shape=tuple(int(d) for d in tensor.shape), dtype=str(tensor.dtype).removeprefix("torch."))

    @property
    def numel(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def nbytes(self) -> int:
        return self.numel * getattr(torch, self.dtype).itemsize

    def to_json(self) -> dict[str, Any]:
        """The plain-data form (the same keys as graph.artifacts.TensorSpec)."""
        return {"shape": list(self.shape), "dtype": self.dtype}


@dataclass
class ProblemInfo:
    """A loaded, checked problem: its source plus the shapes of its inputs and outputs."""

    name: str  # the file stem, e.g. "1_ReLU"
    path: Path  # absolute
    source: str
    level: str | None  # "level1".."level4" when the file sits in such a folder
    init_inputs: list[Any]  # get_init_inputs(), as JSON-able values (tuples become lists)
    inputs: list[TensorInfo | None]  # get_inputs(): None for a non-tensor argument
    outputs: list[TensorInfo] = field(default_factory=list)  # every tensor forward returns
    shapes_from: str = "meta"  # "meta", or "cpu" when an op without meta support forced a real run

    @property
    def output(self) -> TensorInfo | None:
        """The output when forward returns one tensor; the first one when it returns a tuple."""
        return self.outputs[0] if self.outputs else None

    @property
    def input_bytes(self) -> int:
        return sum(spec.nbytes for spec in self.inputs if spec is not None)


class _MetaUnsupported(Exception):
    """An op of the problem has no meta implementation; a real run is needed."""


def load_problem(path: str | Path) -> ProblemInfo:
    """Load one KernelBench-format file and find its input and output shapes without allocating."""
    file = Path(path)
    if not file.exists():
        raise ProblemError(f"{file}: no such file")
    if file.is_dir():
        raise ProblemError(f"{file}: is a directory, not a problem file (load it as a suite)")
    if file.suffix != ".py":
        raise ProblemError(f"{file}: not a .py file (a KernelBench problem is a Python file)")
    file = Path(os.path.abspath(file))  # absolute, but symlinks kept: the level is the folder as given
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{file}: cannot be read as UTF-8 text: {one_line(exc)}") from None
    level = file.parent.name if file.parent.name in LEVEL_NAMES else None
    try:
        init_inputs, inputs, outputs = _run(source, file, torch.device("meta"))
        shapes_from = "meta"
    except _MetaUnsupported as exc:
        input_bytes = exc.args[0] if exc.args else None
        if input_bytes is not None and input_bytes > CPU_FALLBACK_LIMIT_BYTES:
            raise ProblemError(
                f"{file}: an op has no meta support, and a real CPU run would need "
                f"{input_bytes / 2**30:.1f} GiB of inputs (limit {CPU_FALLBACK_LIMIT_BYTES / 2**30:.0f} GiB)"
            ) from None
        init_inputs, inputs, outputs = _run(source, file, torch.device("cpu"))
        shapes_from = "cpu"
    return ProblemInfo(
        name=file.stem,
        path=file,
        source=source,
        level=level,
        init_inputs=init_inputs,
        inputs=inputs,
        outputs=outputs,
        shapes_from=shapes_from,
    )


def load_suite(path: str | Path) -> list[ProblemInfo]:
    """Load a KernelBench-layout directory (level1/, level2/, ...), or one level folder.

    Problems are sorted by level, then by their leading number. Files not named N_Name.py are
    ignored; a malformed problem raises the ProblemError naming that file.
    """
    root = Path(path)
    if not root.exists():
        raise ProblemError(f"{root}: no such directory")
    if not root.is_dir():
        raise ProblemError(f"{root}: not a directory (a suite is a folder with level1/, level2/, ...)")
    return [load_problem(file) for file in suite_files(root)]


def select_problem_files(roots: Iterable[str | Path], only: str | None = None) -> list[Path]:
    """Problem files from suite folders or single files, in order; `only` filters on 'level/name'."""
    files: list[Path] = []
    for root in roots:
        path = Path(root)
        files += [path] if path.is_file() else suite_files(path)
    if only:
        files = [f for f in files if re.search(only, f"{f.parent.name}/{f.stem}")]
    return files


def suite_files(root: Path) -> list[Path]:
    """The problem files of a suite in order, without loading them."""
    if root.name in LEVEL_NAMES:
        folders = [root]
    else:
        folders = sorted(
            (child for child in root.iterdir() if child.is_dir() and child.name in LEVEL_NAMES),
            key=lambda folder: LEVEL_NAMES.index(folder.name),
        )
        if not folders:
            folders = [root]  # a flat folder of N_Name.py files
    files: list[Path] = []
    for folder in folders:
        numbered = []
        for file in folder.iterdir():
            match = PROBLEM_FILE_PATTERN.match(file.name)
            if match and file.is_file():
                numbered.append((int(match.group(1)), file.name, file))
        files.extend(file for _, _, file in sorted(numbered))
    if not files:
        raise ProblemError(
            f"{root}: no problems found (expected level1/, level2/, ... folders or files named N_Name.py)"
        )
    return files


def _run(
    source: str, file: Path, device: torch.device
) -> tuple[list[Any], list[TensorInfo | None], list[TensorInfo]]:
    """Execute the problem on `device` and return (init inputs, input specs, output specs).

    On the meta device an error from an op without meta support raises _MetaUnsupported (carrying
    the input bytes when known) so the caller can retry on the CPU; every other error is the
    problem's own and becomes a ProblemError.
    """
    filename = str(file)
    input_bytes: list[int | None] = [None]

    def fail(stage: str, exc: BaseException) -> ProblemError | _MetaUnsupported:
        if device.type == "meta" and is_meta_unsupported(exc):
            return _MetaUnsupported(input_bytes[0])
        return ProblemError(
            f"{filename}: {stage} raised {type(exc).__name__}{error_line(exc, filename)}: {one_line(exc)}"
        )

    with torch.random.fork_rng(devices=[]), torch.no_grad(), device, MetaRnnShapes():
        module = exec_problem_source(source, file.stem, filename)
        try:
            init_args = module.get_init_inputs()
        except Exception as exc:
            raise fail("get_init_inputs()", exc) from None
        init_list = _as_arg_list(init_args, "get_init_inputs()", filename)
        init_json = [
            _to_json(value, f"get_init_inputs()[{i}]", filename) for i, value in enumerate(init_list)
        ]
        try:
            model = module.Model(*init_list)
        except Exception as exc:
            raise fail("Model(*get_init_inputs())", exc) from None
        if not isinstance(model, nn.Module):
            raise ProblemError(f"{filename}: Model does not subclass torch.nn.Module")
        try:
            input_args = module.get_inputs()
        except Exception as exc:
            raise fail("get_inputs()", exc) from None
        input_list = _as_arg_list(input_args, "get_inputs()", filename)
        inputs = [TensorInfo.of(value) if isinstance(value, torch.Tensor) else None for value in input_list]
        input_bytes[0] = sum(spec.nbytes for spec in inputs if spec is not None)
        try:
            result = model(*input_list)
        except Exception as exc:
            raise fail("forward on the inputs from get_inputs()", exc) from None
    return init_json, inputs, _output_specs(result, filename)


def is_meta_unsupported(exc: BaseException) -> bool:
    """True for errors that say the meta device cannot run an op, not that the problem is wrong."""
    return isinstance(exc, NotImplementedError) or "meta" in str(exc).lower()


def _as_arg_list(value: Any, what: str, filename: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ProblemError(
            f"{filename}: {what} returned a value of type {type(value).__name__}, expected a list or tuple"
        )
    return list(value)


def _to_json(value: Any, what: str, filename: str) -> Any:
    """Constructor arguments as plain data (tuples and torch.Size become lists)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_to_json(item, f"{what}[{i}]", filename) for i, item in enumerate(value)]
    raise ProblemError(
        f"{filename}: {what} is a {type(value).__name__}; constructor arguments must be "
        "numbers, strings, booleans, None or lists of them"
    )


def _output_specs(result: Any, filename: str) -> list[TensorInfo]:
    if isinstance(result, torch.Tensor):
        return [TensorInfo.of(result)]
    if isinstance(result, list | tuple) and result and all(isinstance(t, torch.Tensor) for t in result):
        return [TensorInfo.of(t) for t in result]
    kinds = type(result).__name__
    if isinstance(result, list | tuple):
        items = sorted({type(item).__name__ for item in result})
        kinds += f" of {', '.join(items)}" if items else " (empty)"
    raise ProblemError(
        f"{filename}: forward returned a value of type {kinds}, expected a tensor or a tuple of tensors"
    )
