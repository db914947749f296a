"""Typed artifacts the agents exchange.

Every artifact is a pydantic model, validated where it is produced (the offline policy, an LLM's
structured output, the evaluation worker's JSON) and stored in the graph state as a plain dict
(`model_dump(mode="json")`), so checkpoints, LangGraph Studio and LangSmith all show plain data.
A node reads one back with `graph.state.read(state, "key", Model)`, which validates it once.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Artifact(BaseModel):
    """Base class: forbid unknown keys so a malformed LLM answer fails validation loudly."""

    model_config = ConfigDict(extra="forbid")

    def dump(self) -> dict[str, Any]:
        """The plain-data form kept in graph state."""
        return self.model_dump(mode="json")


# ----------------------------------------------------------------------------------------------
# Problem
# ----------------------------------------------------------------------------------------------


class TensorSpec(Artifact):
    """Shape and dtype of one tensor (an input, an output or an intermediate)."""

    shape: list[int]
    dtype: str = Field(description="torch dtype name without the 'torch.' prefix, e.g. float32")


class Task(Artifact):
    """A KernelBench-format reference program, loaded and checked."""

    name: str = Field(description="problem name, the file stem, e.g. 19_ReLU")
    path: str = Field(description="absolute path of the problem file")
    source: str = Field(description="the problem file's full text")
    level: str | None = Field(default=None, description="suite level folder, e.g. level1")
    init_inputs: list[Any] = Field(default_factory=list, description="get_init_inputs(), as JSON")
    inputs: list[TensorSpec | None] = Field(
        default_factory=list, description="get_inputs(): tensor specs; None for a non-tensor"
    )
    output: TensorSpec | None = Field(default=None, description="the reference forward's output")


# ----------------------------------------------------------------------------------------------
# Plan
# ----------------------------------------------------------------------------------------------


class OpInfo(Artifact):
    """One operator of the reference, as the fx trace saw it."""

    node: str = Field(description="fx node name, unique within the graph")
    op: str = Field(description="canonical operator kind, e.g. linear, relu, softmax, conv2d")
    target: str = Field(description="what the node calls, as written in the reference")
    inputs: list[TensorSpec] = Field(default_factory=list)
    output: TensorSpec | None = None
    flops: int = 0
    bytes: int = Field(0, description="minimum bytes moved: tensor inputs read once, output written once")
    covered: bool = Field(False, description="a custom kernel of the candidate implements it")


class FusionGroup(Artifact):
    """Operators that become one kernel (or one library call plus a fused epilogue)."""

    id: str
    kind: str = Field(
        description="template family: elementwise, reduction, softmax, layernorm, gemm, reference, ..."
    )
    nodes: list[str] = Field(description="fx node names in execution order")
    template: str = Field(description="the template or strategy that will implement the group")
    covered: bool = Field(description="False when the group stays as the reference's PyTorch ops")
    flops: int = 0
    bytes: int = 0
    reason: str = Field("", description="why the group is uncovered or how it was chosen")


class Subtask(Artifact):
    """One item of the coder's to-do list."""

    id: str
    title: str
    detail: str = ""
    groups: list[str] = Field(default_factory=list, description="fusion group ids it implements")


class HostPlan(Artifact):
    """Host-side orchestration of the program."""

    buffers: list[str] = Field(default_factory=list, description="intermediate buffers to allocate")
    streams: int = Field(1, description="CUDA streams the program uses")
    cuda_graph: bool = Field(False, description="capture the forward into a CUDA graph")
    notes: str = ""


class Plan(Artifact):
    """The planner's structured plan."""

    task: str = Field(description="Task.name it plans for")
    ops: list[OpInfo] = Field(default_factory=list)
    groups: list[FusionGroup] = Field(default_factory=list)
    subtasks: list[Subtask] = Field(default_factory=list)
    host: HostPlan = Field(default_factory=lambda: HostPlan())
    total_flops: int = 0
    total_bytes: int = 0
    covered_ops: list[str] = Field(default_factory=list, description="op kinds with custom kernels")
    uncovered_ops: list[str] = Field(default_factory=list, description="op kinds left to PyTorch")
    traced: bool = Field(True, description="False when torch.fx could not trace the reference")
    trace_seconds: float = Field(0.0, description="wall time of the fx trace (0 when it was cached)")
    notes: str = ""


# ----------------------------------------------------------------------------------------------
# Candidate and its evaluation
# ----------------------------------------------------------------------------------------------

CoderMode = Literal["write", "fix", "optimize"]


class Candidate(Artifact):
    """A complete KernelBench-format program defining `ModelNew`."""

    id: int = Field(description="sequence number within the run, starting at 1")
    source: str = Field(description="the Python program, with its CUDA code inline")
    mode: CoderMode
    parent: int | None = Field(None, description="id of the candidate it revises")
    policy: str = Field(description="which policy wrote it: offline, llm, or a test double")
    summary: str = Field("", description="what this version does or changes, one or two lines")
    covered_ops: list[str] = Field(default_factory=list)
    uncovered_ops: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(
        default_factory=dict, description="policy-private knobs (e.g. the offline template per group)"
    )


EvalStatus = Literal["passed", "build_error", "runtime_error", "timeout", "wrong_output", "no_gpu", "crashed"]


class BuildResult(Artifact):
    """How building the candidate's extension went."""

    ok: bool
    seconds: float = 0.0
    cached: bool = False
    errors: list[str] = Field(default_factory=list, description="the compiler's first errors")
    log_tail: str = ""


class TestResult(Artifact):
    """Correctness and timing of one candidate against the reference, from one worker run."""

    __test__ = False  # not a pytest class

    status: EvalStatus
    message: str = ""
    device: str = ""
    trials: int = 0
    trials_passed: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    where: str = Field("", description="index of the worst element, e.g. [3, 17]")
    candidate_ms: float | None = None
    eager_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_cv: float | None = Field(
        None, description="coefficient of variation of the per-round eager/candidate ratios"
    )
    speedup_rounds: int = Field(0, description="rounds the side-by-side ratio was measured over")
    compile_ms: dict[str, float] = Field(
        default_factory=dict, description="torch.compile modes timed in the same rounds: {mode: mean ms}"
    )
    candidate_issue_ms: float | None = Field(
        None,
        description="host time from a timed call's start to its return, mean (the GPU idles that long "
        "before the call's first launch: the program's host overhead, inside its time)",
    )
    eager_issue_ms: float | None = Field(None, description="the same for eager, timed in the same rounds")
    eager_median_ms: float | None = Field(
        None, description="eager's median call (the mean is the headline; a few slow host issues move it)"
    )
    seconds: float = Field(0.0, description="wall time of the whole worker run")
    phases: dict[str, float] = Field(default_factory=dict, description="worker seconds per phase")
    findings: list[dict[str, str]] = Field(
        default_factory=list, description="hack-check findings {id, severity, evidence}, static and dynamic"
    )
    verdict: str = Field("clean", description="clean, suspicious or hacked (tools.checks.verdict)")
    operator_coverage: float | None = Field(
        None, description="share of the reference's GPU time done by the program's own kernels"
    )
    kernelbench: dict[str, Any] | None = Field(
        default=None,
        description="strict runs: the KernelBench-harness cross-check {status, message, max_abs_err, "
        "reference_tf32_spread, tolerance}",
    )
    profile: dict[str, Any] | None = Field(
        default=None,
        description="the candidate's torch-profiler summary from the verification's own trace "
        "(ProfileInfo: device ms, launches, own share, top kernels): the profiler node reads it "
        "instead of starting another worker",
    )
    reference_split: dict[str, Any] | None = Field(
        default=None,
        description="the reference's profile split (device ms per class, PyTorch ops): later "
        "verifications of the same problem reuse it instead of profiling the reference again",
    )


class KernelStat(Artifact):
    """One kernel (or op) in a profile."""

    name: str
    calls: int
    total_ms: float
    share: float = Field(description="fraction of the profiled device time, 0..1")


class Profile(Artifact):
    """What the profiler saw while the candidate ran."""

    source: str = Field(description="which tool produced it: torch_profiler, nsys, ncu")
    device_ms: float = Field(description="device time of one forward")
    kernel_count: int = Field(description="kernel launches in one forward")
    own_kernel_share: float = Field(description="share of device time in the candidate's own kernels")
    top: list[KernelStat] = Field(default_factory=list)
    summary: str = ""


FeedbackKind = Literal[
    "build_error", "runtime_error", "timeout", "wrong_output", "hacked", "optimize", "parse_error"
]


class Feedback(Artifact):
    """The verifier's advice for the coder's next step."""

    kind: FeedbackKind
    summary: str = Field(description="the single most important problem, one line")
    evidence: str = Field("", description="compiler errors, error numbers or profile figures")
    suggestions: list[str] = Field(default_factory=list, description="ranked, most promising first")
    sources: list[str] = Field(default_factory=list, description="guidance notes cited")


class Best(Artifact):
    """The best verified program so far: what finalize reports and the optimiser starts from."""

    candidate: Candidate
    test: TestResult = Field(description="its passing, clean evaluation")
    build: BuildResult


class Attempt(Artifact):
    """One coder -> verifier round, kept in the run's history."""

    candidate: int
    mode: CoderMode
    status: EvalStatus
    candidate_ms: float | None = None
    speedup_vs_eager: float | None = None
    build_seconds: float = 0.0
    eval_seconds: float = Field(0.0, description="wall time of the verifier's worker run")
    phases: dict[str, float] = Field(default_factory=dict, description="worker seconds per phase")
    summary: str = ""
    verdict: str = Field("clean", description="the hack checks' verdict on this candidate")
    message: str = Field("", description="the worker's verdict line (why a failing candidate failed)")


# ----------------------------------------------------------------------------------------------
# Diagnosis
# ----------------------------------------------------------------------------------------------


class Finding(Artifact):
    """One bottleneck the profile diagnosis names, with the numbers that show it and what to do.

    Made by `nodes.diagnosis` and handed to the policy's `advise` (the offline policy maps findings to
    the optimisations it can apply). Not a hack-check finding: those are `TestResult.findings`.
    """

    rule: str = Field(description="the finding id, e.g. launch-bound, uncoalesced-access")
    title: str
    impact: float = Field(description="estimated fraction of the forward's time at stake, 0..1")
    evidence: dict[str, Any] = Field(default_factory=dict, description="the numbers that show it")
    symptoms: list[str] = Field(default_factory=list, description="what guidance notes are matched on")
    metrics: list[str] = Field(default_factory=list, description="the profiler metrics that reveal it")
    advice: list[str] = Field(default_factory=list)
    kernel: str = Field("", description="the kernel it concerns; empty for program-level findings")

    def query(self) -> str:
        """The retrieval query: bottleneck name, symptoms and metric names (no code, no kernel names)."""
        parts = [self.rule.replace("-", " ")]
        if self.symptoms:
            parts.append("Symptoms: " + "; ".join(self.symptoms))
        if self.metrics:
            parts.append("Metrics: " + ", ".join(self.metrics))
        return ". ".join(parts)

    def evidence_text(self) -> str:
        return ", ".join(f"{k}={_number_text(v)}" for k, v in self.evidence.items())

    def to_dict(self) -> dict[str, Any]:
        """The report form: impact rounded to four places."""
        return {**self.model_dump(), "impact": round(self.impact, 4)}


def _number_text(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
