"""What the reward core scores (a Sample) and what it returns (a Breakdown).

Plain dataclasses, no engine: the TRL and verl adapters, the CLI and the dataset rows all build a
Sample and read a Breakdown's `to_dict()`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from graph.artifacts import Feedback, Plan, Task

Skill = Literal["write", "revise"]
SKILLS: tuple[str, ...] = ("write", "revise")
DIMENSIONS: tuple[str, ...] = ("anti_hacking", "cuda_engineering", "operator_coverage", "skill_compliance")


@dataclass
class Sample:
    """One answer to score: the problem, the skill's inputs and the model's completion."""

    task: Task
    plan: Plan
    skill: Skill
    completion: str
    previous: str | None = None  # skill 2: the program being revised
    feedback: Feedback | None = None  # skill 2: the verifier's feedback on it
    mode: str = "write"  # write, fix or optimize

    def __post_init__(self) -> None:
        if self.skill not in SKILLS:
            raise ValueError(f"unknown skill {self.skill!r}; skills: {', '.join(SKILLS)}")
        if self.skill == "revise":
            if not self.previous:
                raise ValueError("skill revise needs the previous program")
            if self.mode == "write":
                self.mode = "optimize" if self.feedback and self.feedback.kind == "optimize" else "fix"
        else:
            self.mode = "write"


@dataclass
class RulePart:
    """The verifier's part: build, correctness and capped speedup (GPU), or build and static checks."""

    score: float
    stage: (
        str  # no_program, build_error, runtime_error, timeout, crashed, wrong_output, built, parsed, passed
    )
    path: str  # gpu (built, checked, timed), cpu-verify (the same on the CPU), cpu-build, static
    speedup: float | None = None
    note: str = ""


@dataclass
class Dimension:
    score: float  # 0..1
    reason: str


@dataclass
class Rubric:
    """The four rubric dimensions, their aggregate and who scored them."""

    anti_hacking: Dimension
    cuda_engineering: Dimension
    operator_coverage: Dimension
    skill_compliance: Dimension
    aggregate: float
    source: str  # "deterministic" or "judge:<model>"

    def dimensions(self) -> dict[str, Dimension]:
        return {name: getattr(self, name) for name in DIMENSIONS}


@dataclass
class Breakdown:
    """The reward of one answer and everything it was computed from."""

    total: float
    rule: RulePart
    rubric: Rubric
    hacked: bool
    skill: str
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        rubric: dict[str, Any] = {name: asdict(dim) for name, dim in self.rubric.dimensions().items()}
        rubric |= {"aggregate": self.rubric.aggregate, "source": self.rubric.source}
        return {
            "total": self.total,
            "rule": asdict(self.rule),
            "rubric": rubric,
            "hacked": self.hacked,
            "skill": self.skill,
            "evidence": list(self.evidence),
        }

    def component(self, name: str) -> float:
        """A scalar by name: total, rule, rubric (the aggregate), hacked, or a dimension's name."""
        if name == "total":
            return self.total
        if name == "rule":
            return self.rule.score
        if name == "rubric":
            return self.rubric.aggregate
        if name == "hacked":
            return 1.0 if self.hacked else 0.0
        if name in DIMENSIONS:
            return getattr(self.rubric, name).score
        raise ValueError(
            f"unknown reward component {name!r}; known: total, rule, rubric, hacked, {DIMENSIONS}"
        )
