"""The rule part of the reward: the real verifier path, in the isolated worker.

Where it runs decides what it can know:

- gpu: the worker's `verify` action in strict mode (build, correctness over several input sets,
  timing against eager in the same run, the dynamic hack checks, operator coverage);
- cpu-build: no GPU here, so the worker's `build` action only: the program's extensions must build
  (nvcc and the host compiler run for real); correctness and speed stay unknown, and the rule part
  says so;
- static: no build either (fast, for wiring tests and format-only training): the program must only
  be extractable; the static hack checks still run.

`RuleSettings.device` says where the gpu mode's `verify` runs: `cuda` (the default), or `cpu` for
programs whose extensions are plain C++ (the whole verify path, correctness, timing and the dynamic
hack checks, on a machine without a GPU: the rule part's tests run it so).

The ladder (ours; the paper rewards only correct programs, Kevin-32B gives 0.3 plus the speedup):
no program 0, build error 0.05, crash or timeout 0.1, wrong output 0.15, built on a CPU-only machine
0.2, extracted but not built 0.1, correct 0.3 + min(speedup, 5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from graph.artifacts import Plan, Task, TestResult
from rl.reward.sample import RulePart
from tools.protocol import EvalRequest, EvalResponse

RuleMode = Literal["auto", "gpu", "build", "static"]
RULE_MODES: tuple[str, ...] = ("auto", "gpu", "build", "static")

SPEEDUP_CAP = 5.0
CORRECT_BASE = 0.3
LADDER = {
    "no_program": 0.0,
    "build_error": 0.05,
    "runtime_error": 0.1,
    "timeout": 0.1,
    "crashed": 0.1,
    "wrong_output": 0.15,
    "built": 0.2,
    "parsed": 0.1,
}
CPU_NOTE = (
    "CPU-only machine: the rule part comes from the build and the static checks; correctness and "
    "speed need a GPU"
)
STATIC_NOTE = "static mode: the program was not built; the rule part comes from the static checks only"

Evaluator = Callable[[EvalRequest], EvalResponse]


@dataclass
class RuleSettings:
    """How the rule part evaluates: where, with what budget, against which cache and architecture."""

    mode: RuleMode = "auto"
    timeout_s: float = 300.0
    perf_trials: int = 30
    correctness_trials: int = 5
    arch: str | None = None
    cache_dir: str | None = None
    device: Literal["cuda", "cpu"] = "cuda"  # where `verify` runs (cpu: C++-only programs, tests)

    def resolved_mode(self) -> str:
        """gpu, build or static: 'auto' is gpu when torch sees a CUDA device, else build."""
        if self.mode not in RULE_MODES:
            raise ValueError(f"unknown rule mode {self.mode!r}; modes: {', '.join(RULE_MODES)}")
        if self.mode != "auto":
            return self.mode
        import torch

        return "gpu" if torch.cuda.is_available() else "build"


def eval_request(task: Task, plan: Plan, program: str, settings: RuleSettings, mode: str) -> EvalRequest:
    """The worker request: strict verification on a GPU, a build otherwise."""
    request = EvalRequest(
        action="verify" if mode == "gpu" else "build",
        problem_name=task.name,
        problem_source=task.source,
        candidate_source=program,
        device=settings.device,
        mode="strict",
        correctness_trials=settings.correctness_trials,
        perf_trials=settings.perf_trials,
        time_reference=True,
        timeout_s=settings.timeout_s,
        work_flops=int(plan.total_flops or 0),
        work_bytes=int(plan.total_bytes or 0),
    )
    if settings.arch:
        request["arch"] = settings.arch
    if settings.cache_dir:
        request["cache_dir"] = settings.cache_dir
    return request


def local_evaluator(settings: RuleSettings) -> Evaluator:
    """Evaluations in a fresh worker process on this machine (tools.evaluate)."""
    from tools.evaluate import evaluate

    return lambda request: evaluate(request, timeout_s=settings.timeout_s)


def rule_from_test(test: TestResult, mode: str, device: str = "cuda") -> RulePart:
    """The ladder applied to one worker result (a TestResult joins the static and dynamic findings)."""
    status = test.status
    if mode == "gpu":
        path = "gpu" if device == "cuda" else "cpu-verify"
        if status == "passed":
            speedup = test.speedup_vs_eager
            capped = min(speedup, SPEEDUP_CAP) if speedup else 0.0
            note = f"correct; speedup {speedup:.3g}x over eager" if speedup else "correct; not timed"
            return RulePart(CORRECT_BASE + capped, "passed", path, speedup, note)
        if status == "no_gpu":
            return RulePart(LADDER["built"], "built", "cpu-build", None, CPU_NOTE)
        first = (test.message or status).splitlines()[0][:300]
        return RulePart(LADDER.get(status, LADDER["crashed"]), status, path, None, first)
    if status == "passed":  # the build action answered: every extension built
        return RulePart(LADDER["built"], "built", "cpu-build", None, CPU_NOTE)
    first = (test.message or status).splitlines()[0][:300]
    return RulePart(LADDER.get(status, LADDER["crashed"]), status, "cpu-build", None, f"{first}; {CPU_NOTE}")


def evaluate_program(
    task: Task,
    plan: Plan,
    program: str,
    settings: RuleSettings,
    mode: str,
    evaluator: Evaluator | None = None,
) -> tuple[TestResult, dict[str, Any]]:
    """Run the worker on `program`; the TestResult (with merged hack findings) and the raw response."""
    from nodes.support.worker_client import to_test_result

    run = evaluator or local_evaluator(settings)
    response = run(eval_request(task, plan, program, settings, mode))
    return to_test_result(response, program), dict(response)
