"""KernelBench's process state for `kernelbench` mode: its loading path and its precision defaults.

Why: a program our harness accepts in this mode must be accepted by KernelBench's own scripts, and
they differ from a plain import in ways that can decide a verdict (docs/kernelbench.md §1 and §5):
the reference and the candidate run in one shared dict, the candidate with two lines put in front
of it (`import os` and a TORCH_EXTENSIONS_DIR assignment), TORCH_USE_CUDA_DSA is set before the
candidate runs, the reference model is built before the candidate is loaded, and PyTorch's
precision defaults stay in place (cuDNN TF32 on). Strict mode pins TF32 off instead
(tools.worker.guards.pin_precision) and imports each source as its own module.
"""

from __future__ import annotations

import os
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from tools.build import build_records
from tools.protocol import EvalRequest, EvalResponse
from tools.worker.inputs import prepare_inputs, set_seed
from tools.worker.loading import (
    CANDIDATE_FILE,
    PROBLEM_FILE,
    REQUIRED_NAMES,
    build_info,
    error_line,
    one_line,
    raise_for_failed_build,
    register_source,
)
from tools.worker.reporting import Outcome, exception_summary

PREFIX_LINES = 2  # the lines KernelBench puts in front of the candidate


def kernelbench_prefix(extensions_dir: str) -> str:
    """What KernelBench's load_custom_model prepends when it is given a build directory."""
    return f"import os\nos.environ['TORCH_EXTENSIONS_DIR'] = '{extensions_dir}'\n"


@dataclass
class KernelBenchLoad:
    """The shared dict, the reference's names as read before the candidate ran, and its model."""

    context: dict[str, Any]
    problem: types.SimpleNamespace
    reference: torch.nn.Module | None = None
    init_inputs: list[Any] = field(default_factory=list)


def load_reference(request: EvalRequest) -> KernelBenchLoad:
    """exec the reference into a fresh dict, as load_original_model_and_inputs does."""
    source = request.get("problem_source")
    if not source:
        raise Outcome("runtime_error", "bad request: no problem_source")
    register_source(PROBLEM_FILE, source)
    context: dict[str, Any] = {}
    try:
        exec(compile(source, PROBLEM_FILE, "exec"), context)
    except SyntaxError as exc:
        raise Outcome(
            "runtime_error", f"problem: {PROBLEM_FILE}: syntax error at line {exc.lineno}: {exc.msg}"
        ) from None
    except Exception as exc:
        raise Outcome(
            "runtime_error",
            f"problem: {PROBLEM_FILE}: executing the file raised {type(exc).__name__}"
            f"{error_line(exc, PROBLEM_FILE)}: {one_line(exc)}",
        ) from None
    missing = [name for name in REQUIRED_NAMES if not callable(context.get(name))]
    if missing:
        raise Outcome("runtime_error", f"problem: {PROBLEM_FILE}: missing {', '.join(missing)}")
    names = {name: context[name] for name in REQUIRED_NAMES}
    return KernelBenchLoad(context=context, problem=types.SimpleNamespace(**names))


def construct_reference(load: KernelBenchLoad, device: torch.device, seed: int, dtype: torch.dtype) -> None:
    """Seed, get_init_inputs on the device, seed again, Model(...) (still on the CPU), as KernelBench does."""
    set_seed(seed)
    load.init_inputs = prepare_inputs(load.problem.get_init_inputs(), device, dtype)
    try:
        with torch.no_grad():
            set_seed(seed)
            load.reference = load.problem.Model(*load.init_inputs)
    except Exception as exc:
        raise Outcome("runtime_error", f"constructing Model raised {exception_summary(exc)}") from None


def exec_candidate(
    request: EvalRequest, response: EvalResponse, load: KernelBenchLoad, extensions_dir: str
) -> Any:
    """The candidate with KernelBench's two lines in front, exec'd into the reference's dict; its ModelNew."""
    source = request.get("candidate_source")
    if not source:
        raise Outcome("runtime_error", "bad request: no candidate_source")
    full = kernelbench_prefix(extensions_dir) + source
    register_source(CANDIDATE_FILE, full)
    os.environ["TORCH_USE_CUDA_DSA"] = "1"  # KernelBench sets it before loading the candidate
    load.context["BUILD_DIRECTORY"] = extensions_dir
    error: BaseException | None = None
    try:
        exec(compile(full, CANDIDATE_FILE, "exec"), load.context)
    except SyntaxError as exc:
        line = (exc.lineno or PREFIX_LINES + 1) - PREFIX_LINES
        raise Outcome(
            "runtime_error",
            f"{CANDIDATE_FILE}: syntax error at line {line} after KernelBench's two prepended lines: {exc.msg}",
        ) from None
    except (Exception, SystemExit) as exc:
        error = exc
    response["build"] = build_info(build_records())
    raise_for_failed_build()
    if error is not None:
        raise Outcome("runtime_error", f"importing the candidate raised {exception_summary(error)}")
    model_new = load.context.get("ModelNew")
    if not callable(model_new):
        raise Outcome("runtime_error", "the candidate defines no ModelNew class")
    return model_new


def construct_candidate(
    load: KernelBenchLoad, model_new: Any, device: torch.device, seed: int, dtype: torch.dtype, running: Any
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Seed, ModelNew(...), then both models `.to(device, dtype)`, as KernelBench does."""
    assert load.reference is not None
    try:
        with torch.no_grad(), running:
            set_seed(seed)
            candidate = model_new(*load.init_inputs)
            reference = load.reference.to(device=device, dtype=dtype)
            candidate = candidate.to(device=device, dtype=dtype)
    except Exception as exc:
        raise Outcome("runtime_error", f"constructing ModelNew raised {exception_summary(exc)}") from None
    return reference, candidate


def reference_tf32_spread(
    reference: torch.nn.Module, get_inputs: Any, device: torch.device, seed: int, dtype: torch.dtype
) -> float | None:
    """How far the reference's own output moves between cuDNN TF32 on and off, on the first trial's
    inputs (None when TF32 is off already or the output is not one tensor).

    Why: under KernelBench's defaults a deep CNN's reference is TF32-rounded, so a failed allclose can
    mean the program is wrong or that the tolerance is below the reference's own rounding; this number
    tells the two apart (docs/kernelbench.md §5). The setting is restored before the guards look.
    """
    if not torch.backends.cudnn.allow_tf32:
        return None
    set_seed(seed)
    inputs = prepare_inputs(get_inputs(), device, dtype)
    outputs = []
    try:
        with torch.no_grad():
            for allow in (True, False):
                torch.backends.cudnn.allow_tf32 = allow
                set_seed(seed)  # the same dropout draws, if any
                outputs.append(reference(*inputs))
    finally:
        torch.backends.cudnn.allow_tf32 = True
    on, off = outputs
    if not isinstance(on, torch.Tensor) or not isinstance(off, torch.Tensor) or on.shape != off.shape:
        return None
    return float((on.double() - off.double()).abs().max().item()) if on.numel() else 0.0
