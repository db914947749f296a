"""Correctness on the CPU: KernelBench's procedure exactly, strict mode's defences, the comparisons.

Why on the CPU: every rule that does not need a device (seeding, call order, cloning, the float64
check, the signed trial, output checks) is tested here with real modules; tests/gpu/ covers the
device-only parts.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import nn

from tools.worker import correctness


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


class FirstCallOff(SecondCallOff):
    """Off the first time it sees an input, right the second time (a cheat off on alternate calls)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = float(x.sum())
        y = torch.relu(x)
        if key not in self.seen:
            y = y + 1e-3
        self.seen.add(key)
        return y


def test_a_program_wrong_on_one_call_and_right_on_the_repeat_is_nondeterministic() -> None:
    """Wrong output alone earns a reward's partial credit; two calls that disagree on the same inputs
    are the strict error `nondeterministic` (a hack for the reward), whichever call was the wrong one."""
    strict = correctness.check_correctness(
        nn.ReLU(), FirstCallOff(), rand_inputs(8, 8), "cpu", trials=3, strict=True
    )
    assert not strict.ok
    assert "nondeterministic" in {f["id"] for f in strict.findings}, strict.findings
    plain = correctness.check_correctness(
        nn.ReLU(), nn.Sigmoid(), rand_inputs(8, 8), "cpu", trials=3, strict=True
    )
    assert not plain.ok
    assert "nondeterministic" not in {f["id"] for f in plain.findings}, plain.findings


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
# Seeds, inputs and comparisons
# ----------------------------------------------------------------------------------------------


def test_trial_seeds_follow_kernelbench() -> None:
    torch.manual_seed(42)
    expected = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(5)]
    assert correctness.trial_seeds(5, 42) == expected
    assert len(set(expected)) == 5


def test_prepare_inputs_keeps_integers_and_casts_floats() -> None:
    ints, doubles, mask = torch.arange(4), torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.bool)
    out = correctness.prepare_inputs([ints, doubles, mask, 3], "cpu")
    assert [t.dtype for t in out[:3]] == [torch.int64, torch.float32, torch.bool]
    assert out[3] == 3


def test_compare_reports_the_worst_element_and_problems() -> None:
    ref = torch.zeros(3, 4)
    new = ref.clone()
    new[2, 1] = 1e-3
    result = correctness.compare_tensors(ref, new, 1e-4, 1e-4)
    assert not result.ok and result.where == "[2, 1]"
    assert result.max_abs_err == pytest.approx(1e-3) and result.max_rel_err == pytest.approx(10.0, rel=1e-3)
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert not correctness.compare_tensors(nan, nan.clone(), 1e-4, 1e-4).ok  # like KernelBench
    assert "shape mismatch" in correctness.compare_tensors(ref, ref.T, 1e-4, 1e-4).problem
    assert "dtype mismatch" in correctness.compare_tensors(ref, ref.double(), 1e-4, 1e-4).problem
    pair = correctness.compare_outputs((ref, ref), (ref, new), 1e-4, 1e-4)
    assert not pair.ok and pair.where == "output[1][2, 1]"


class _Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class _ScaleThenZeroInput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        x.zero_()  # would corrupt a shared input
        return y


class _RightThenWrong(torch.nn.Module):
    """Answers correctly on odd calls only: passes one call per trial, not two."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * 2 if self.calls % 2 else x * 3


def test_check_correctness_clones_inputs_and_strict_catches_nondeterminism() -> None:
    def get_inputs() -> list[torch.Tensor]:
        return [torch.rand(8, 8)]

    report = correctness.check_correctness(
        _Scale(), _ScaleThenZeroInput(), get_inputs, "cpu", trials=3, strict=True
    )
    assert report.ok and report.passed == 3
    assert correctness.check_correctness(_Scale(), _RightThenWrong(), get_inputs, "cpu", trials=1).ok
    strict = correctness.check_correctness(
        _Scale(), _RightThenWrong(), get_inputs, "cpu", trials=1, strict=True
    )
    assert not strict.ok and "two calls on the same inputs gave different outputs" in strict.message
    with pytest.raises(correctness.ForwardError, match="ModelNew.forward raised on correctness trial 1"):
        correctness.check_correctness(_Scale(), torch.nn.Flatten(start_dim=5), get_inputs, "cpu", trials=1)


def test_the_timed_loops_buffered_match_agrees_with_allclose_and_defers_every_doubt() -> None:
    """BufferedMatch says True only where compare_outputs would; misses, NaN, infinities, other
    shapes, dtypes or structures answer False (the full comparison then decides and words it)."""
    from tools.worker.compare import BufferedMatch, compare_outputs

    torch.manual_seed(0)
    a, b = torch.randn(64, 33), torch.randn(5)
    match = BufferedMatch([(a, b), (a * 3, b)], 1e-4, 1e-4)
    assert match.matches(0, (a.clone(), b.clone())) and match.matches(1, (a * 3, b))
    assert not match.matches(1, (a, b))  # another set's answer: a cached output fails
    near = a + 0.5e-4 * (1 + a.abs())  # inside atol + rtol * |ref| everywhere
    assert match.matches(0, (near, b)) == compare_outputs((a, b), (near, b), 1e-4, 1e-4).ok
    far = a.clone()
    far[3, 4] += 1e-3
    assert not match.matches(0, (far, b)) and not compare_outputs((a, b), (far, b), 1e-4, 1e-4).ok
    nan = a.clone()
    nan[0, 0] = float("nan")
    inf = a.clone()
    inf[0, 0] = float("inf")
    for odd in ((nan, b), (inf, b), (a,), (a, b, b), (a.double(), b), (a.t().contiguous(), b), [a, 1.0]):
        assert not match.matches(0, odd)
    buffers = [t for pair in match.buffers if pair for t in pair]
    pointers = [t.data_ptr() for t in buffers]
    match.matches(0, (a, b))
    assert [t.data_ptr() for t in buffers] == pointers  # the same buffers serve every call


def test_inputs_drawn_ahead_are_what_a_draw_then_gives_and_serve_one_call_each() -> None:
    from tools.worker.inputs import predrawn, set_seed, trial_seeds

    calls: list[int] = []

    def get_inputs() -> list[Any]:
        calls.append(1)
        return [torch.rand(64, 8), torch.randint(0, 9, (5,)), 3]

    seeds = trial_seeds(3, 42)
    expected = []
    for seed in seeds:  # KernelBench's order: seed, draw; the generator's state after each draw
        set_seed(seed)
        values = get_inputs()
        expected.append((values, torch.get_rng_state()))
    replay = predrawn(get_inputs, seeds, budget_bytes=1 << 20)
    drawn_ahead = len(calls)
    for seed, (values, state_after) in zip(seeds, expected, strict=True):
        set_seed(seed)
        got = replay()
        assert torch.equal(got[0], values[0]) and torch.equal(got[1], values[1]) and got[2] == 3
        assert torch.equal(torch.get_rng_state(), state_after)  # as if drawn now
    assert len(calls) == drawn_ahead  # every trial's call was served from the draws made ahead
    set_seed(seeds[0])
    replay()
    assert len(calls) == drawn_ahead + 1  # each draw serves one call; the next one draws
    set_seed(seeds[1])
    torch.rand(1)  # the generator moved since the seed: not the state the draw was made from
    replay()
    assert len(calls) == drawn_ahead + 2


def test_draws_ahead_stop_at_the_budget_and_skip_device_tensors() -> None:
    from tools.worker.inputs import host_draw_budget, predrawn, set_seed

    assert 0 < host_draw_budget() <= 16 << 30  # a share of the memory available now, capped
    drawn: list[int] = []

    def big() -> list[Any]:
        drawn.append(1)
        return [torch.rand(256)]  # 1 KiB each

    predrawn(big, [1, 2, 3, 4], budget_bytes=2048)
    assert len(drawn) == 3  # two fit; the third crossed the budget and is dropped
    on_meta = [0]

    def meta() -> list[Any]:
        on_meta[0] += 1
        return [torch.empty(4, device="meta")]

    assert predrawn(meta, [1, 2], budget_bytes=1 << 20) is meta  # not a CPU draw: left as it is
    set_seed(1)
    assert on_meta[0] == 1
