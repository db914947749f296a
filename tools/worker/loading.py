"""Loading what a request names: the problem (trusted reference) and the candidate (untrusted), then both models.

Why here: the worker, the profilers' driver and the baseline process all execute a problem's source
the same way (`exec_problem_source`, which tools.problem uses too) and a candidate the same way
(`import_candidate`: its `load_inline` builds go through the cache, and a failed build is a
build_error even when the candidate caught it). Both exist only as strings, so they are registered
with linecache for readable tracebacks. `construct` is KernelBench's seeded construction.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
import traceback
import types
from typing import TYPE_CHECKING

import torch

from tools.build import BuildRecord, build_records
from tools.protocol import BuildInfo, EvalRequest, EvalResponse
from tools.worker.inputs import prepare_inputs, set_seed
from tools.worker.reporting import Outcome, exception_summary

if TYPE_CHECKING:  # the watcher is passed in; importing it here would load the profiler for tools.problem
    from tools.worker.dynamic_checks import Watch

CANDIDATE_FILE = "candidate.py"
PROBLEM_FILE = "problem.py"
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
MAX_DETAIL_CHARS = 300


class ProblemError(Exception):
    """A problem file that cannot be used; str() is one line naming the file and the problem."""


def exec_problem_source(source: str, name: str, filename: str = "<problem>") -> types.ModuleType:
    """Execute a problem's source as a fresh module and check it defines the KernelBench names."""
    module = types.ModuleType(f"stitch_problem_{name}")
    module.__file__ = filename
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        raise ProblemError(f"{filename}: syntax error at line {exc.lineno}: {exc.msg}") from None
    try:
        exec(code, module.__dict__)
    except Exception as exc:  # the reference's own top-level code failed
        raise ProblemError(
            f"{filename}: executing the file raised {type(exc).__name__}{error_line(exc, filename)}: {one_line(exc)}"
        ) from None
    missing = [n for n in REQUIRED_NAMES if not callable(module.__dict__.get(n))]
    if missing:
        raise ProblemError(
            f"{filename}: missing {', '.join(missing)} (KernelBench format needs {', '.join(REQUIRED_NAMES)})"
        )
    return module


def error_line(exc: BaseException, filename: str) -> str:
    """' at line N' for the deepest traceback frame inside the problem file, else ''."""
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == filename]
    return f" at line {lines[-1]}" if lines else ""


def one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception message, shortened: errors must stay one line."""
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "") or repr(exc)
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 3] + "..."


def register_source(filename: str, source: str) -> None:
    """Let tracebacks show the lines of code that only exist as strings."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def load_problem(request: EvalRequest) -> types.ModuleType:
    source = request.get("problem_source")
    if not source:
        raise Outcome("runtime_error", "bad request: no problem_source")
    register_source(PROBLEM_FILE, source)
    try:
        return exec_problem_source(source, request.get("problem_name", "problem"), PROBLEM_FILE)
    except ProblemError as exc:
        raise Outcome("runtime_error", f"problem: {exc}") from None


def build_info(records: list[BuildRecord]) -> BuildInfo:
    failed = next((r for r in records if not r.ok), None)
    kernels: list[str] = []
    for record in records:
        kernels += [k for k in record.kernels if k not in kernels]
    return BuildInfo(
        ok=failed is None,
        seconds=round(sum(r.seconds for r in records), 3),
        cached=bool(records) and all(r.cached for r in records),
        errors=list(failed.errors) if failed else [],
        log_tail=failed.log_tail if failed else "",
        extensions=[r.module_name for r in records],
        kernels=kernels,
    )


def raise_for_failed_build() -> None:
    """A failed build decides the status, even if the program caught the error and carried on."""
    failed = next((r for r in build_records() if not r.ok), None)
    if failed is not None:
        first = failed.errors[0] if failed.errors else "see the build log"
        raise Outcome("build_error", f"building extension '{failed.name}' failed: {first}")


def import_candidate(request: EvalRequest, response: EvalResponse) -> types.ModuleType:
    """Execute the candidate (which builds its extensions); any failed build is a build_error.

    A failed build counts even when the candidate caught the BuildError and fell back to PyTorch.
    """
    source = request.get("candidate_source")
    if not source:
        raise Outcome("runtime_error", "bad request: no candidate_source")
    register_source(CANDIDATE_FILE, source)
    module = types.ModuleType("stitch_candidate")
    module.__file__ = CANDIDATE_FILE
    sys.modules[module.__name__] = module
    error: BaseException | None = None
    try:
        exec(compile(source, CANDIDATE_FILE, "exec"), module.__dict__)
    except SyntaxError as exc:
        raise Outcome(
            "runtime_error", f"{CANDIDATE_FILE}: syntax error at line {exc.lineno}: {exc.msg}"
        ) from None
    except (Exception, SystemExit) as exc:  # SystemExit: a candidate calling sys.exit() at import
        error = exc
    response["build"] = build_info(build_records())
    raise_for_failed_build()
    if error is not None:
        raise Outcome("runtime_error", f"importing the candidate raised {exception_summary(error)}")
    return module


def construct(
    problem: types.ModuleType,
    candidate: types.ModuleType,
    device: torch.device,
    seed: int,
    dtype: torch.dtype = torch.float32,
    watch: Watch | None = None,
    built: tuple[torch.nn.Module, torch.nn.Module] | None = None,
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """KernelBench's seeding: the same seed before get_init_inputs, Model and ModelNew; both models
    then move to the device and the precision's dtype (`.to(device, dtype)`, as KernelBench does).

    built: the two models `construct_on_host` made before the device lock; they only move here.
    """
    if built is None:
        built = _build(problem, candidate, device, seed, dtype, watch)
    models = []
    for who, model in zip(("Model", "ModelNew"), built, strict=True):
        running = watch.running() if watch is not None and who == "ModelNew" else contextlib.nullcontext()
        try:
            with torch.no_grad(), running:
                models.append(model.to(device=device, dtype=dtype))
        except Exception as exc:
            raise Outcome(
                "runtime_error", f"moving {who} to {device} raised {exception_summary(exc)}"
            ) from None
    return models[0], models[1]


def construct_on_host(
    problem: types.ModuleType,
    candidate: types.ModuleType,
    seed: int,
    dtype: torch.dtype = torch.float32,
    watch: Watch | None = None,
) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """Both models built on the CPU, before the worker takes the GPU's device lock (a large
    model's seeded weight init takes seconds there); `construct(..., built=...)` moves them.

    None when get_init_inputs returns tensors: KernelBench moves those to the GPU before the
    models see them, so such models are built under the lock, on the device, as before.
    """
    set_seed(seed)
    if any(isinstance(value, torch.Tensor) for value in problem.get_init_inputs()):
        return None
    return _build(problem, candidate, torch.device("cpu"), seed, dtype, watch)


def _build(
    problem: types.ModuleType,
    candidate: types.ModuleType,
    device: torch.device,
    seed: int,
    dtype: torch.dtype,
    watch: Watch | None,
) -> tuple[torch.nn.Module, torch.nn.Module]:
    if not callable(getattr(candidate, "ModelNew", None)):
        raise Outcome("runtime_error", "the candidate defines no ModelNew class")
    set_seed(seed)
    init_inputs = prepare_inputs(problem.get_init_inputs(), device, dtype)
    steps = (("Model", problem.Model), ("ModelNew", candidate.ModelNew))
    models = []
    for who, cls in steps:
        set_seed(seed)
        running = watch.running() if watch is not None and who == "ModelNew" else contextlib.nullcontext()
        try:
            with torch.no_grad(), running:
                models.append(cls(*init_inputs))
        except Exception as exc:
            raise Outcome("runtime_error", f"constructing {who} raised {exception_summary(exc)}") from None
    return models[0], models[1]
