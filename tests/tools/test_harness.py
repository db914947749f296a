"""The harness modes on the CPU: KernelBench's procedure exactly, strict mode's defences, dynamic checks.

Why on the CPU: every rule that does not need a device (seeding, call order, cloning, the float64
check, the signed trial, rotation, output checks, guards, watchers, profile classification) is
tested here with real modules and real worker runs; tests/gpu/ covers the device-only parts.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from tools import build
from tools.evaluate import evaluate
from tools.protocol import EvalRequest
from tools.worker import correctness, dynamic_checks, timing
from tools.worker import entry as worker

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "tests" / "candidates" / "worker"
FAULTS = REPO / "tests" / "candidates" / "adversarial" / "faults"


def rand_inputs(*shape: int) -> Any:
    return lambda: [torch.rand(*shape)]


class Recorder(nn.Module):
    """y = 2x, logging (who, tensor id, initial seed) of every call."""

    def __init__(self, who: str, log: list[tuple[str, int, int]]) -> None:
        super().__init__()
        self.who, self.log = who, log

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.log.append((self.who, id(x), torch.initial_seed()))
        return x * 2


# ----------------------------------------------------------------------------------------------
# KernelBench mode: eval_kernel_against_ref, step for step
# ----------------------------------------------------------------------------------------------


def test_kernelbench_mode_reference_first_same_tensors_reseeded() -> None:
    log: list[tuple[str, int, int]] = []
    report = correctness.check_correctness(
        Recorder("Model", log), Recorder("ModelNew", log), rand_inputs(4, 8), "cpu", trials=3
    )
    assert report.ok and report.mode == "kernelbench"
    seeds = correctness.trial_seeds(3, 42)
    assert [entry[0] for entry in log] == ["Model", "ModelNew"] * 3
    for trial in range(3):
        (_, ref_id, ref_seed), (_, new_id, _) = log[2 * trial], log[2 * trial + 1]
        assert ref_id == new_id  # KernelBench passes the very same tensors, no clone
        assert ref_seed == seeds[trial]  # set_seed(trial_seed) again right before the reference


def test_integer_inputs_stay_integer_and_tolerance_follows_precision() -> None:
    class Gather(nn.Module):
        def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
            return x[torch.arange(x.shape[0]), idx]

    def get_inputs() -> list[torch.Tensor]:
        return [torch.rand(6, 8), torch.randint(0, 8, (6,))]

    for strict in (False, True):
        report = correctness.check_correctness(Gather(), Gather(), get_inputs, "cpu", trials=2, strict=strict)
        assert report.ok, report.message  # KernelBench HEAD casts idx to float and fails here
    assert [correctness.tolerance_for_precision(p) for p in ("fp32", "fp16", "bf16")] == [1e-4, 1e-2, 1e-2]
    prepared = correctness.prepare_inputs(
        [torch.ones(2, dtype=torch.float64), torch.arange(2)], "cpu", torch.float16
    )
    assert [t.dtype for t in prepared] == [torch.float16, torch.int64]


# ----------------------------------------------------------------------------------------------
# Strict mode
# ----------------------------------------------------------------------------------------------


def test_strict_mode_alternates_order_clones_repeats_and_runs_hooks() -> None:
    log: list[tuple[str, int, int]] = []
    hooked: list[str] = []
    hooks = correctness.StrictHooks(
        before_call=lambda who: hooked.append(f"+{who}"), after_call=hooked.append
    )
    report = correctness.check_correctness(
        Recorder("Model", log),
        Recorder("ModelNew", log),
        rand_inputs(4, 8),
        "cpu",
        trials=4,
        strict=True,
        hooks=hooks,
    )
    assert report.ok and report.signed_trial == "passed" and report.passed == 4
    order = [entry[0] for entry in log]
    assert order[:3] == ["ModelNew", "Model", "ModelNew"]  # trial 1: candidate first, then again
    assert order[3:6] == ["Model", "ModelNew", "ModelNew"]  # trial 2: reference first
    assert len(hooked) == 2 * (len(log) - 1) and hooked[0] == "+ModelNew"  # the signed trial's probe has none
    assert report.norm_err == 0.0 and report.norm_allowed == pytest.approx(1e-5)


def test_signed_inputs_mix_signs_and_keep_magnitudes_and_integers() -> None:
    x, idx = torch.rand(1000) + 0.1, torch.arange(5)
    signed_x, signed_idx = correctness.signed_inputs([x, idx], seed=7)
    assert torch.equal(signed_x.abs(), x) and 300 < int((signed_x < 0).sum()) < 700
    assert signed_idx is idx
    assert torch.equal(correctness.signed_inputs([x], seed=7)[0], signed_x)  # seeded


class Zeros(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


class Copy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


class Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


class MatMul(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class HalfInputsMatMul(nn.Module):
    """fp32 accumulation of fp16-rounded operands: the error model of TF32 or an fp16 kernel."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.half().float() @ b.half().float()


class Lazy(torch.Tensor):
    pass


class LazyOutput(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.Tensor._make_subclass(Lazy, torch.relu(x))


class SecondCallOff(nn.Module):
    """Right the first time it sees an input, off the second time: one call per input never notices."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[float] = set()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = float(x.sum())
        y = torch.relu(x)
        if key in self.seen:
            y = y + 1e-3
        self.seen.add(key)
        return y


CHEATS = [
    # (name, reference, candidate, get_inputs, finding the strict mode must name)
    ("zeros_pass_loose_tolerance", Softmax(), Zeros(), rand_inputs(4, 32768), "zero_output"),
    ("identity_is_relu_on_positive_inputs", nn.ReLU(), Copy(), rand_inputs(64, 64), None),
    (
        "fp16_rounding_averages_out_on_positive_inputs",
        MatMul(),
        HalfInputsMatMul(),
        lambda: [torch.rand(16, 4096), torch.rand(4096, 16)],
        "precision_loss",
    ),
    ("lazy_tensor_subclass", nn.ReLU(), LazyOutput(), rand_inputs(8, 8), "lazy_output"),
    ("wrong_on_a_repeated_call", nn.ReLU(), SecondCallOff(), rand_inputs(8, 8), "nondeterministic"),
]


@pytest.mark.parametrize(
    ("name", "reference", "candidate", "get_inputs", "named"), CHEATS, ids=[c[0] for c in CHEATS]
)
def test_strict_mode_fails_what_kernelbench_mode_passes(
    name: str, reference: nn.Module, candidate: nn.Module, get_inputs: Any, named: str | None
) -> None:
    kernelbench = correctness.check_correctness(reference, candidate, get_inputs, "cpu", trials=5)
    assert kernelbench.ok, f"{name}: the cheat should fool KernelBench's rules: {kernelbench.message}"
    if isinstance(candidate, SecondCallOff):
        candidate.seen.clear()
    strict = correctness.check_correctness(reference, candidate, get_inputs, "cpu", trials=5, strict=True)
    assert not strict.ok
    if named:
        assert named in {f["id"] for f in strict.findings}, strict.findings
    else:
        assert strict.signed_trial == "failed", strict.message


def test_fp16_rounding_fails_the_float64_check_on_the_signed_trial() -> None:
    report = correctness.check_correctness(
        MatMul(),
        HalfInputsMatMul(),
        lambda: [torch.rand(16, 4096), torch.rand(4096, 16)],
        "cpu",
        trials=2,
        strict=True,
    )
    evidence = next(f["evidence"] for f in report.findings if f["id"] == "precision_loss")
    assert "float64 reference" in evidence
    assert report.norm_err is not None and report.norm_err > report.norm_allowed  # type: ignore[operator]


def test_nan_output_and_constant_output_are_named() -> None:
    class NaNs(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.full_like(x, math.nan)

    nan = correctness.check_correctness(nn.ReLU(), NaNs(), rand_inputs(4, 4), "cpu", trials=1, strict=True)
    assert not nan.ok and "nonfinite_output" in {f["id"] for f in nan.findings}

    class Remembers(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first: torch.Tensor | None = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.first is None:
                self.first = torch.zeros_like(x)
            return self.first.clone()

    class Tiny(nn.Module):  # changes with its input, but stays within allclose of zero
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 1e-6

    constant = correctness.check_correctness(
        Tiny(), Remembers(), rand_inputs(4, 4), "cpu", trials=3, strict=True
    )
    ids = {f["id"] for f in constant.findings}
    assert not constant.ok and ("constant_output" in ids or "zero_output" in ids)


def test_stochastic_and_constant_references_and_mutating_candidates_are_notes_not_failures() -> None:
    class Noisy(nn.Module):  # draws inside forward: the strict mode reseeds before every call
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.rand_like(x)

    noisy = correctness.check_correctness(Noisy(), Noisy(), rand_inputs(8, 8), "cpu", trials=2, strict=True)
    assert noisy.ok, noisy.message
    assert "float64_check_skipped" in {f["id"] for f in noisy.findings}

    class Ones(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ones_like(x)

    constant = correctness.check_correctness(Ones(), Ones(), rand_inputs(4, 4), "cpu", trials=3, strict=True)
    assert constant.ok and "reference_constant" in {f["id"] for f in constant.findings}

    class DoubleThenZero(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2
            x.zero_()
            return y

    class Double(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    mutating = correctness.check_correctness(
        Double(), DoubleThenZero(), rand_inputs(4, 4), "cpu", trials=2, strict=True
    )
    assert mutating.ok  # its clone was zeroed, the reference's inputs were not
    assert {"id": "mutates_inputs", "severity": "warning"}.items() <= mutating.findings[0].items()


# ----------------------------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------------------------


def test_kernelbench_timing_reuses_the_same_tensors_and_discards_the_first_call() -> None:
    seen: list[int] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        seen.append(id(x))
        return x

    x = torch.rand(4)
    stats = timing.time_kernelbench(fn, [x], "cpu", warmup=3, trials=5)
    assert stats["trials"] == 5 and stats["method"] == "kernelbench"
    assert len(seen) == 3 + 1 + 5 and set(seen) == {id(x)}


def test_strict_timing_rotates_clones_and_checks_every_output() -> None:
    sets = [[torch.full((3,), float(i))] for i in range(3)]
    seen: list[float] = []
    checked: list[int] = []
    after: list[int] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        seen.append(float(x[0]))
        assert all(x is not s[0] for s in sets)  # a clone, never the set itself
        return x + 1

    def check(index: int, out: torch.Tensor) -> None:
        checked.append(index)
        assert torch.equal(out, sets[index][0] + 1)

    stats = timing.time_strict(
        fn, sets, "cpu", warmup=2, trials=6, check=check, after_call=lambda: after.append(1)
    )
    assert stats["trials"] == 6 and stats["input_sets"] == 3 and stats["method"] == "strict"
    assert seen == [0.0, 1.0] + [float(i % 3) for i in range(7)]  # warm-ups, then discard + 6
    assert checked == [i % 3 for i in range(7)] and len(after) == 7

    def cached(x: torch.Tensor) -> torch.Tensor:
        return sets[0][0] + 1  # the answer for set 0, whatever the input

    with pytest.raises(AssertionError):
        timing.time_strict(cached, sets, "cpu", warmup=0, trials=3, check=check)


def test_strict_summary_flags_off_stream_work_and_clock_disagreement() -> None:
    honest = timing.strict_summary([1.0] * 5, [1.01] * 5, [1.02] * 5, 2)
    assert not honest["off_stream"] and not honest["clock_disagreement"] and honest["mean_ms"] == 1.0
    side_stream = timing.strict_summary([0.01] * 5, [2.0] * 5, [2.01] * 5, 2)
    assert side_stream["off_stream"] and side_stream["mean_ms"] == 2.0  # the device-wide time is reported
    patched = timing.strict_summary([1.0] * 5, [1.0] * 5, [5.0] * 5, 1)
    assert patched["clock_disagreement"] and not patched["off_stream"]


def test_time_forward_dispatches_and_rejects_unknown_methods() -> None:
    x = torch.rand(4)
    assert timing.time_forward(torch.relu, [x], "cpu", warmup=0, trials=3)["method"] == "strict"
    assert timing.time_forward(torch.relu, [x], "cpu", 0, 3, method="kernelbench")["method"] == "kernelbench"
    with pytest.raises(ValueError, match="unknown timing method"):
        timing.time_forward(torch.relu, [x], "cpu", method="host")


# ----------------------------------------------------------------------------------------------
# Dynamic checks
# ----------------------------------------------------------------------------------------------


def _event(
    name: str,
    *,
    cpu: bool,
    id_: int = 0,
    linked: int = 0,
    start: float = 0,
    end: float = 0,
    range_: bool = False,
) -> Any:
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    return FunctionEvent(
        id=id_,
        name=name,
        thread=0,
        start_us=start,
        end_us=end,
        device_type=DeviceType.CPU if cpu else DeviceType.CUDA,
        linked_correlation_id=linked,
        is_user_annotation=range_,
    )


def _trace(
    kernels: list[tuple[str, int, float]], ops: list[tuple[int, str, int]], link_device: bool = True
) -> list[Any]:
    """CPU ops (id, name, parent id) with their kernels, and device kernels (name, linked op id, us).

    link_device=False leaves the device events' correlation ids at 0, as torch 2.11's parsed trace does.
    Like a real trace, the device timeline also holds the wrapper's range (a gpu_user_annotation
    spanning every kernel), which is not work and must not be counted.
    """
    events: dict[int, Any] = {}
    for id_, name, parent in ops:
        events[id_] = _event(name, cpu=True, id_=id_)
        if parent:
            events[id_].cpu_parent = events[parent]
    device = []
    for name, linked, us in kernels:
        device.append(_event(name, cpu=False, linked=linked if link_device else 0, end=us))
        if linked:
            events[linked].append_kernel(name, 0, us)
    span = sum(us for _, _, us in kernels)
    device.append(_event(dynamic_checks.WRAPPER, cpu=False, end=span, range_=True))
    return list(events.values()) + device


def test_profile_classes_and_operator_coverage() -> None:
    wrapper = [(1, dynamic_checks.WRAPPER, 0)]
    reference = _trace(
        [("sm90_xmma_gemm_f32", 3, 800.0), ("void at::native::vectorized_elementwise_kernel<4>", 4, 200.0)],
        wrapper + [(2, "aten::linear", 1), (3, "aten::addmm", 2), (4, "aten::relu", 1)],
    )
    own_relu = _trace(
        [("sm90_xmma_gemm_f32", 3, 800.0), ("relu_f4(float4 const*, float4*, long)", 1, 150.0)],
        wrapper + [(2, "aten::linear", 1), (3, "aten::addmm", 2)],
    )
    all_own = _trace([("fused_linear_relu", 1, 900.0), ("Memset (Device)", 1, 5.0)], wrapper)
    ref = dynamic_checks.classify_events(reference, ())
    assert ref["torch_ops_ms"] == {"aten::linear": 0.8, "aten::relu": 0.2} and ref["device_ms"] == 1.0
    partial = dynamic_checks.classify_events(own_relu, {"relu_f4"})
    assert partial["split_ms"] == {"own": 0.15, "torch": 0.8}
    assert dynamic_checks.coverage(partial, ref) == pytest.approx(0.2)
    full = dynamic_checks.classify_events(all_own, {"fused_linear_relu"})
    assert dynamic_checks.coverage(full, ref) == 1.0 and full["split_ms"]["data"] == 0.005
    findings = dynamic_checks.profile_findings(partial, {"relu_f4"})
    assert [f["id"] for f in findings] == ["pytorch_fallback"] and "aten::linear" in findings[0]["evidence"]


def test_ghost_kernels_and_library_calls_in_the_profile() -> None:
    torch_only = dynamic_checks.classify_events(
        _trace(
            [("void at::native::vectorized_elementwise_kernel<4>", 2, 100.0)],
            [(1, "w", 0), (2, "aten::relu", 1)],
        ),
        {"relu_f4"},
    )
    ghost = dynamic_checks.profile_findings(torch_only, {"relu_f4"})
    assert ghost[0]["id"] == "own_kernels_not_run" and ghost[0]["severity"] == "error"
    assert dynamic_checks.profile_findings(torch_only, set())[0]["id"] == "no_custom_kernel_ran"
    direct = dynamic_checks.classify_events(_trace([("nvjet_sgemm_128x64", 1, 100.0)], [(1, "w", 0)]), set())
    assert direct["split_ms"] == {"library": 0.1} and dynamic_checks.profile_findings(direct, set()) == []
    graph_replay = dynamic_checks.classify_events(
        _trace([("void at::native::reduce_kernel<512, 1>", 0, 50.0)], []), set()
    )
    assert graph_replay["split_ms"] == {"torch": 0.05}  # a PyTorch kernel with no op: replayed from a graph


def test_kernels_link_to_their_ops_through_the_op_kernel_lists_when_device_ids_are_missing() -> None:
    # A program calling torch.matmul in forward: cuBLAS kernel names, but launched by aten::matmul.
    trace = _trace(
        [("nvjet_sgemm_128x64", 3, 100.0), ("relu_f4(float4 const*)", 1, 20.0)],
        [(1, dynamic_checks.WRAPPER, 0), (2, "aten::matmul", 1), (3, "aten::mm", 2)],
        link_device=False,
    )
    split = dynamic_checks.classify_events(trace, {"relu_f4"})
    assert split["split_ms"] == {"own": 0.02, "torch": 0.1}
    assert split["torch_ops_ms"] == {"aten::matmul": 0.1}
    direct = dynamic_checks.classify_events(
        _trace([("nvjet_sgemm_128x64", 1, 100.0)], [(1, "w", 0)], link_device=False), set()
    )
    assert direct["split_ms"] == {"library": 0.1}  # launched by the program itself: a direct library call


def test_cpu_poison_is_a_noop_and_persisting_l2_reports_what_it_saw() -> None:
    assert dynamic_checks.poison_free_memory("cpu") == 0
    l2 = dynamic_checks.PersistingL2()
    assert l2.findings() == []
    l2.seen_limit = 4 << 20
    assert l2.findings()[0]["id"] == "persisting_l2"


def test_watch_sees_threads_left_alive_and_processes_spawned() -> None:
    watch = dynamic_checks.Watch()
    release = threading.Event()
    with watch.running():
        thread = threading.Thread(target=release.wait, name="deferred-work", daemon=True)
        thread.start()
        os.system("true")
    watch.os_threads = set()
    watch.after_call()
    try:
        found = {f["id"]: f for f in watch.findings()}
    finally:
        release.set()
        thread.join()
    assert "deferred-work" in found["background_thread"]["evidence"]
    assert "os.system" in found["spawns_process"]["evidence"]
    quiet = dynamic_checks.Watch()
    os.system("true")  # not while a candidate runs
    assert "spawns_process" not in {f["id"] for f in quiet.findings()}


# ----------------------------------------------------------------------------------------------
# Worker runs, in this process and in subprocesses (no builds)
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Undo what a worker run changes in its process: the patched loaders, precision flags, the module."""
    ce = build.cpp_extension()
    monkeypatch.setattr(ce, "load_inline", ce.load_inline)
    monkeypatch.setattr(ce, "load", ce.load)
    saved = {name: get() for name, get in worker._GUARDED.items()}
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved["torch.backends.cuda.matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = saved["torch.backends.cudnn.allow_tf32"]
    torch.set_float32_matmul_precision(saved["torch.get_float32_matmul_precision()"])
    sys.modules.pop("stitch_candidate", None)


def affine_request(candidate: str, tmp_path: Path, **overrides: Any) -> EvalRequest:
    request = EvalRequest(
        action="verify",
        problem_name="affine",
        problem_source=(WORKER / "affine_problem.py").read_text(),
        candidate_source=candidate,
        device="cpu",
        perf_trials=6,
        cache_dir=str(tmp_path),
    )
    request.update(overrides)  # type: ignore[typeddict-item]
    return request


def test_worker_strict_and_kernelbench_responses(in_process: None, tmp_path: Path) -> None:
    source = (WORKER / "torch_ok.py").read_text()
    strict = worker.run_request(affine_request(source, tmp_path, mode="strict", timing_input_sets=3))
    assert strict["status"] == "passed", strict["message"]
    assert strict["findings"] == []
    assert strict["correctness"]["mode"] == "strict" and strict["correctness"]["signed_trial"] == "passed"
    assert (
        strict["timing"]["candidate"]["method"] == "strict"
        and strict["timing"]["candidate"]["input_sets"] == 3
    )
    kb = worker.run_request(affine_request(source, tmp_path, mode="kernelbench"))
    assert kb["status"] == "passed" and kb["timing"]["candidate"]["method"] == "kernelbench"
    assert "findings" not in kb and kb["correctness"]["mode"] == "kernelbench"
    bad = worker.run_request(affine_request(source, tmp_path, mode="lenient"))
    assert bad["status"] == "runtime_error" and "unknown mode 'lenient'" in bad["message"]


PATCH_IN_FORWARD = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        torch.cuda.Event.elapsed_time = lambda self, end: 0.001
        return x * self.scale + self.bias
"""

SLOW_PATH_IMPOSSIBLY_FAST = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        return x * self.scale + self.bias
"""


def test_worker_rejects_a_patch_made_inside_forward(in_process: None, tmp_path: Path) -> None:
    original = torch.cuda.Event.elapsed_time
    try:
        response = worker.run_request(affine_request(PATCH_IN_FORWARD, tmp_path, mode="strict"))
    finally:
        torch.cuda.Event.elapsed_time = original
    assert response["status"] == "runtime_error"
    assert "torch.cuda.Event.elapsed_time" in response["message"]
    assert [f["id"] for f in response["findings"]] == ["patches_harness"]


def test_worker_flags_a_time_below_the_speed_of_light(in_process: None, tmp_path: Path) -> None:
    response = worker.run_request(
        affine_request(SLOW_PATH_IMPOSSIBLY_FAST, tmp_path, mode="strict", sol_ms=1e3)
    )
    assert response["status"] == "passed"
    impossible = next(f for f in response["findings"] if f["id"] == "impossible_speed")
    assert impossible["severity"] == "error" and "speed-of-light floor" in impossible["evidence"]


NOISY_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        return x * self.scale + self.bias + 1e-3 * torch.rand_like(x)


def get_inputs():
    return [torch.rand(32, 64)]


def get_init_inputs():
    return [2.0, 0.5]
"""


def test_a_stochastic_reference_does_not_fail_an_honest_candidate(in_process: None, tmp_path: Path) -> None:
    """Reseeded before every correctness call, both draw the same noise; timed outputs are not compared."""
    twin = NOISY_PROBLEM.split("\n\n\ndef get_inputs")[0].replace("class Model(", "class ModelNew(")
    response = worker.run_request(affine_request(twin, tmp_path, mode="strict", problem_source=NOISY_PROBLEM))
    assert response["status"] == "passed", response["message"]
    assert "timing_output_check_skipped" in {f["id"] for f in response["findings"]}


BACKGROUND_THREAD = """
import threading
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        y = torch.empty_like(x)

        def later():
            time.sleep(0.05)
            torch.add(torch.mul(x, self.scale), self.bias, out=y)

        threading.Thread(target=later, daemon=True).start()
        return y
"""


def test_deferred_work_in_a_thread_fails_in_a_real_worker(tmp_path: Path) -> None:
    response = evaluate(affine_request(BACKGROUND_THREAD, tmp_path, mode="strict"), timeout_s=120)
    assert response["status"] == "wrong_output", response["message"]
    assert "background_thread" in {f["id"] for f in response["findings"]}


def test_check_cli_without_a_gpu_runs_the_static_part_and_says_so() -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the answer on a machine without a GPU")
    import json
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "graph.cli",
            "check",
            str(WORKER / "tf32_switch.py"),
            "--problem",
            str(WORKER / "affine_problem.py"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["verdict"] == "hacked"
    skipped = next(f for f in report["findings"] if f["id"] == "dynamic_checks_skipped")
    assert skipped["severity"] == "info" and "GPU" in skipped["evidence"]


# ----------------------------------------------------------------------------------------------
# Fault isolation on the CPU: each fault classified within its limit, the next run unaffected
# ----------------------------------------------------------------------------------------------

CPU_FAULTS = [
    ("segfault", (FAULTS / "segfault.py").read_text(), "crashed", 60),
    ("spin_python", (FAULTS / "spin_python.py").read_text(), "timeout", 12),
    ("print_flood", (WORKER / "noisy.py").read_text(), "passed", 120),
    ("compiler_hang", (FAULTS / "compiler_hang.py").read_text(), "timeout", 25),
]


@pytest.mark.slow
def test_faults_are_classified_within_their_limits_and_do_not_leak(tmp_path: Path) -> None:
    healthy = (WORKER / "torch_ok.py").read_text()
    rows = []
    for name, source, expected, limit in CPU_FAULTS:
        started = time.monotonic()
        response = evaluate(affine_request(source, tmp_path / name, mode="strict"), timeout_s=limit)
        seconds = time.monotonic() - started
        after = evaluate(affine_request(healthy, tmp_path / name, mode="strict"), timeout_s=120)
        rows.append((name, expected, response["status"], round(seconds, 1), limit, after["status"]))
        assert response["status"] == expected, (name, response["message"])
        assert seconds < limit + 10, (name, seconds)
        assert after["status"] == "passed", (name, after["message"])
        if name == "compiler_hang":
            assert "while building extension 'harness_compiler_hang'" in response["message"]
        if name == "print_flood":
            assert len(response["stdout_tail"]) < 4200
    print("\nfault            expected  got       seconds  limit  next run")
    for row in rows:
        print("{:<16} {:<9} {:<9} {:>7}  {:>5}  {}".format(*row))
