"""The reward core: `score(sample)` -> total, rule part, four rubric dimensions, hacked, evidence.

    total = -1                                         if the answer hacks
          = min(3, rule * (1 + lambda * (r - 0.5)))    otherwise

`rule` is the verifier's part (rl.reward.rule: 0.3 + min(speedup, 5) for a correct program on a
GPU, less for each failure stage, build and static checks only on a CPU-only machine); `r` is the
rubric's mean over anti-hacking, CUDA engineering, operator coverage and skill compliance, from a
judge model or the deterministic rubric; lambda is 1.0 for skill 1 and 0.7 for skill 2; the cap is
3. Multiplicative shaping, the lambdas and the cap follow the paper's public reward code. A hack is
any error finding of the static or dynamic checks, a warning that the program does not do the work
itself (rl.reward.rubric.HACK_WARNINGS), kernels that leave every planned operator to PyTorch, or
the judge's major-hacking flag; it earns -1, below every honest failure (the paper gives 0), so a
cheat never beats trying.

Nothing here imports an RL engine: TRL, verl and the CLI call the same `score`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from graph.artifacts import Feedback, Plan, Task
from rl.reward import rubric as rubrics
from rl.reward.answer import Answer, read_answer
from rl.reward.judge import Judge, JudgeError
from rl.reward.rule import LADDER, STATIC_NOTE, Evaluator, RuleSettings, evaluate_program, rule_from_test
from rl.reward.sample import Breakdown, RulePart, Sample
from tools.checks import finding, hack_report

HACK_REWARD = -1.0
TOTAL_CAP = 3.0
LAMBDA = {"write": 1.0, "revise": 0.7}


@dataclass
class RewardSettings:
    """Everything `score` needs besides the sample: the rule part's settings and the judge."""

    rule: RuleSettings = field(default_factory=RuleSettings)
    judge: Judge | None = None  # None: the deterministic rubric
    evaluator: Evaluator | None = None  # None: a local worker process per evaluation


def combine(rule: float, rubric: float, skill: str, hacked: bool) -> float:
    """The total from its parts (see the module docstring)."""
    if hacked:
        return HACK_REWARD
    return min(TOTAL_CAP, rule * (1.0 + LAMBDA[skill] * (rubric - 0.5)))


def _rule_and_findings(
    sample: Sample, answer: Answer, settings: RewardSettings, evidence: list[str]
) -> tuple[RulePart, list[dict[str, str]], float | None]:
    if answer.program is None:
        return RulePart(LADDER["no_program"], "no_program", "static", None, answer.error), [], None
    mode = settings.rule.resolved_mode()
    if mode == "static":
        report = hack_report(answer.program)
        rule = RulePart(LADDER["parsed"], "parsed", "static", None, STATIC_NOTE)
        return rule, list(report["findings"]), None
    test, response = evaluate_program(
        sample.task, sample.plan, answer.program, settings.rule, mode, settings.evaluator
    )
    rule = rule_from_test(test, mode, settings.rule.device)
    if response.get("seconds") is not None:
        evidence.append(f"worker: {rule.stage} in {response['seconds']:.1f} s ({rule.path})")
    return rule, list(test.findings), test.operator_coverage


def _decorative(
    sample: Sample, answer: Answer, findings: list[dict[str, str]], measured: float | None
) -> bool:
    """Kernels exist, yet none of the plan's work is theirs (measured on a GPU, else estimated)."""
    if not answer.kernels or not sample.plan.ops:
        return False
    if measured is not None:
        return measured < 0.01
    share, _ = rubrics.static_coverage(sample.plan, findings, True)
    return share <= 0.0


def score(sample: Sample, settings: RewardSettings | None = None) -> Breakdown:
    """The reward of one answer, with every component and the evidence behind it."""
    settings = settings or RewardSettings()
    evidence: list[str] = []
    answer = read_answer(sample.completion, sample.task.source)
    rule, findings, measured = _rule_and_findings(sample, answer, settings, evidence)
    if _decorative(sample, answer, findings, measured):
        decorative = finding(
            rubrics.DECORATIVE, "error", "the program's kernels do none of the plan's operators"
        )
        findings.append({key: str(value) for key, value in decorative.items()})
    rubric = rubrics.deterministic_rubric(sample, answer, findings, measured)
    judge_flag = ""
    if settings.judge is not None and answer.program is not None:
        try:
            rubric, judge_flag = settings.judge.rubric(sample, answer, findings, rule)
        except JudgeError as exc:
            evidence.append(f"judge failed ({exc}); the deterministic rubric scored this answer")
    hacks = rubrics.hack_findings(findings)
    hacked = bool(hacks or judge_flag)
    evidence += [
        f"{f['severity']} {f['id']}: {f['evidence']}" for f in findings if f.get("severity") != "info"
    ]
    if judge_flag:
        evidence.append(f"judge: major hacking: {judge_flag}")
    if rule.note:
        evidence.append(f"rule: {rule.note}")
    total = combine(rule.score, rubric.aggregate, sample.skill, hacked)
    return Breakdown(
        total=round(total, 6), rule=rule, rubric=rubric, hacked=hacked, skill=sample.skill, evidence=evidence
    )


def make_sample(
    problem: Task | str,
    completion: str,
    skill: str,
    *,
    plan: Plan | Mapping[str, Any] | str | None = None,
    previous: str | None = None,
    feedback: Feedback | Mapping[str, Any] | str | None = None,
    mode: str = "write",
) -> Sample:
    """A Sample from plain data: a problem path or Task, plans and feedback as dicts or JSON text.

    Without a plan, the offline planner's plan for the problem is used (it traces the reference).
    """
    import json

    task = problem if isinstance(problem, Task) else load_task(problem)
    if isinstance(plan, str):
        plan = json.loads(plan) if plan.strip() else None
    if isinstance(feedback, str):
        feedback = json.loads(feedback) if feedback.strip() else None
    resolved_plan = Plan.model_validate(plan) if plan is not None else offline_plan(task)
    resolved_feedback = Feedback.model_validate(feedback) if feedback is not None else None
    return Sample(
        task=task,
        plan=resolved_plan,
        skill=skill,  # type: ignore[arg-type]
        completion=completion,
        previous=previous or None,
        feedback=resolved_feedback,
        mode=mode or "write",
    )


def load_task(path: str) -> Task:
    """A problem file as a Task (ProblemError for a bad one)."""
    from nodes.planner import load_task as load_from_state

    return load_from_state({"problem_path": path})


def offline_plan(task: Task) -> Plan:
    from codegen.policy import OfflinePolicy

    return OfflinePolicy().plan(task)


def task_from_source(name: str, source: str, level: str | None = None) -> Task:
    """A Task from a problem's text, without running it: the reward reads only its name and source."""
    return Task(name=name, path="", source=source, level=level)
