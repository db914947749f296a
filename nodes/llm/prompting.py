"""Turning artifacts into the messages each role sends.

The wording lives in `nodes/prompts/*.md` (readable and reviewable on its own); this module only
renders artifacts as compact text (tables, fenced code, clipped logs) and fills the templates. The
messages are (role, text) pairs, which ChatOpenAI accepts as they are.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from string import Template

from graph.artifacts import Candidate, Feedback, OpInfo, Plan, Profile, Task, TestResult
from graph.context import Context

log = logging.getLogger(__name__)

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
EXAMPLE_SOLUTION = Path(__file__).resolve().parents[2] / "docs" / "examples" / "relu_solution.py"

Messages = list[tuple[str, str]]

MAX_OP_ROWS = 80
MAX_SOURCE_CHARS = 24_000
MAX_EVIDENCE_CHARS = 6_000

_GPU_NAMES = {
    "sm_80": "A100 (Ampere)",
    "sm_86": "Ampere GPU",
    "sm_89": "Ada GPU (L40S class)",
    "sm_90": "H100/H200 (Hopper)",
    "sm_100": "B200 (Blackwell)",
}


class PromptTemplateError(RuntimeError):
    """A prompt file is missing or names a placeholder the renderer does not fill."""


@functools.cache
def template(name: str) -> Template:
    path = PROMPTS_DIR / name
    try:
        return Template(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PromptTemplateError(f"prompt file {path} cannot be read: {exc.strerror}") from None


def fill(name: str, **values: object) -> str:
    """Fill template `name`; every placeholder must be given."""
    try:
        return template(name).substitute({k: str(v) for k, v in values.items()})
    except (KeyError, ValueError) as exc:
        raise PromptTemplateError(f"prompt {name}: placeholder {exc} is not filled or malformed") from None


# ----------------------------------------------------------------------------------------------
# Rendering artifacts as text
# ----------------------------------------------------------------------------------------------


def clip(text: str, limit: int) -> str:
    """Keep the head and tail of a long text (errors sit at both ends of build logs)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters omitted ...]\n{text[-half:]}"


def fence(code: str, lang: str = "") -> str:
    """A fenced block that survives code containing backtick fences itself."""
    longest = max((len(m) for m in re.findall(r"`{3,}", code)), default=2)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{code.rstrip()}\n{ticks}"


def gpu_name(arch: str) -> str:
    return _GPU_NAMES.get(arch, f"GPU ({arch})")


def gencode_flag(arch: str) -> str:
    """nvcc's -gencode flag for `sm_XY` (the build flag the program format asks for)."""
    match = re.fullmatch(r"sm_(\d+[a-z]?)", arch)
    if not match:
        return f"-arch={arch}"
    number = match.group(1)
    return f"-gencode=arch=compute_{number},code=sm_{number}"


def _shape(spec: object) -> str:
    if spec is None:
        return "-"
    shape = getattr(spec, "shape", None)
    dtype = getattr(spec, "dtype", "")
    return f"{dtype}[{', '.join(str(d) for d in shape or [])}]"


def _count(value: int) -> str:
    for unit, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return str(value)


def render_op_table(ops: Sequence[OpInfo], limit: int = MAX_OP_ROWS) -> str:
    """A markdown table of the traced operators, with FLOPs, bytes and their ratio."""
    if not ops:
        return "(no operator table: the reference could not be traced here; read the source)"
    rows = [
        "| node | op | target | output | FLOPs | bytes | FLOP/byte |",
        "|---|---|---|---|---|---|---|",
    ]
    for op in ops[:limit]:
        intensity = f"{op.flops / op.bytes:.2f}" if op.bytes else "-"
        rows.append(
            f"| {op.node} | {op.op} | {op.target} | {_shape(op.output)} | {_count(op.flops)} | "
            f"{_count(op.bytes)} | {intensity} |"
        )
    if len(ops) > limit:
        rows.append(f"| ... {len(ops) - limit} more operators | | | | | | |")
    total_flops = sum(op.flops for op in ops)
    total_bytes = sum(op.bytes for op in ops)
    rows.append(
        f"\nTotal: {_count(total_flops)} FLOPs, {_count(total_bytes)} bytes over {len(ops)} operators."
    )
    return "\n".join(rows)


def render_profile(profile: Profile | None) -> str:
    if profile is None:
        return "(not profiled)"
    lines = [
        f"Source: {profile.source}. Device time of one forward: {profile.device_ms:.4g} ms over "
        f"{profile.kernel_count} kernel launches; {profile.own_kernel_share:.0%} in the program's own kernels."
    ]
    for stat in profile.top:
        lines.append(f"- {stat.name}: {stat.calls} call(s), {stat.total_ms:.4g} ms ({stat.share:.0%})")
    if profile.summary:
        lines.append(profile.summary)
    return "\n".join(lines)


def render_inputs(task: Task) -> str:
    lines = [f"- input {i}: {_shape(spec) if spec else 'not a tensor'}" for i, spec in enumerate(task.inputs)]
    if task.init_inputs:
        lines.append(f"- constructor arguments (get_init_inputs): {json.dumps(task.init_inputs)}")
    if task.output is not None:
        lines.append(f"- output: {_shape(task.output)}")
    return "\n".join(lines) or "(not recorded: read get_inputs in the source)"


def render_plan(plan: Plan) -> str:
    """The plan as the coder needs it: groups, to-do list, host plan, coverage."""
    lines: list[str] = []
    if plan.groups:
        lines.append("Fusion groups:")
        for group in plan.groups:
            state = "covered" if group.covered else "left to PyTorch"
            reason = f"; {group.reason}" if group.reason else ""
            lines.append(
                f"- {group.id} [{group.kind}, {state}]: nodes {', '.join(group.nodes)}; "
                f"strategy: {group.template}{reason}"
            )
    if plan.subtasks:
        lines.append("To-do:")
        for number, sub in enumerate(plan.subtasks, 1):
            detail = f": {sub.detail}" if sub.detail else ""
            groups = f" (groups {', '.join(sub.groups)})" if sub.groups else ""
            lines.append(f"{number}. [{sub.id}] {sub.title}{groups}{detail}")
    host = plan.host
    lines.append(
        f"Host: {host.streams} stream(s); CUDA graph: {'yes' if host.cuda_graph else 'no'}; "
        f"buffers: {', '.join(host.buffers) or 'none'}{'; ' + host.notes if host.notes else ''}"
    )
    lines.append(f"Covered op kinds: {', '.join(plan.covered_ops) or 'none'}")
    lines.append(f"Left to PyTorch: {', '.join(plan.uncovered_ops) or 'none'}")
    if plan.total_flops or plan.total_bytes:
        lines.append(f"Work: {_count(plan.total_flops)} FLOPs, {_count(plan.total_bytes)} bytes minimum.")
    if plan.notes:
        lines.append(f"Notes: {plan.notes}")
    return "\n".join(lines)


def render_feedback(feedback: Feedback) -> str:
    lines = [f"Summary: {feedback.summary}"]
    if feedback.evidence:
        lines += ["Evidence:", fence(clip(feedback.evidence, MAX_EVIDENCE_CHARS))]
    if feedback.suggestions:
        lines.append("Suggestions, most promising first:")
        lines += [f"{n}. {s}" for n, s in enumerate(feedback.suggestions, 1)]
    if feedback.sources:
        lines.append(f"Sources: {', '.join(feedback.sources)}")
    return "\n".join(lines)


def render_test(test: TestResult) -> str:
    parts = [f"status {test.status}", f"{test.trials_passed}/{test.trials} correctness trials passed"]
    if test.candidate_ms is not None:
        parts.append(f"candidate {test.candidate_ms:.4g} ms")
    if test.eager_ms is not None:
        parts.append(f"PyTorch eager {test.eager_ms:.4g} ms")
    if test.speedup_vs_eager is not None:
        parts.append(f"speedup {test.speedup_vs_eager:.3g}x")
    if test.max_abs_err is not None:
        parts.append(f"max abs error {test.max_abs_err:.3g}")
    if test.device:
        parts.append(f"on {test.device}")
    return "; ".join(parts) + "."


def _example_solution() -> str:
    try:
        return EXAMPLE_SOLUTION.read_text(encoding="utf-8")
    except OSError:
        log.warning("one-shot example %s is missing; the coder prompt goes without it", EXAMPLE_SOLUTION)
        return "(example unavailable in this installation)"


# ----------------------------------------------------------------------------------------------
# Messages per role
# ----------------------------------------------------------------------------------------------


def _gpu(context: Context) -> dict[str, str]:
    return {"gpu_name": gpu_name(context.gpu_arch), "gpu_arch": context.gpu_arch}


def planner_messages(
    context: Context, task: Task, ops: Sequence[OpInfo], profile: Profile | None
) -> Messages:
    return [
        ("system", fill("planner_system.md", **_gpu(context))),
        (
            "human",
            fill(
                "planner_user.md",
                task_name=task.name,
                reference_source=fence(task.source, "python"),
                inputs=render_inputs(task),
                op_table=render_op_table(ops),
                profile=render_profile(profile),
            ),
        ),
    ]


def _coder_system(context: Context) -> tuple[str, str]:
    return ("system", fill("coder_system.md", gencode=gencode_flag(context.gpu_arch), **_gpu(context)))


def coder_write_messages(
    context: Context, task: Task, plan: Plan, offline_source: str | None, retry: Feedback | None = None
) -> Messages:
    """Skill 1's messages; `retry` (why the last answer was unusable) goes before the starting point."""
    starting_point = (
        fill("starting_point.md", offline_source=fence(clip(offline_source, MAX_SOURCE_CHARS), "python"))
        if offline_source
        else ""
    )
    if retry is not None:
        starting_point = (
            "\n## Your previous answer could not be used\n"
            + render_feedback(retry)
            + "\nAnswer again with one complete program in a single ```python block.\n"
            + starting_point
        )
    return [
        _coder_system(context),
        (
            "human",
            fill(
                "coder_write.md",
                task_name=task.name,
                reference_source=fence(task.source, "python"),
                plan=render_plan(plan),
                starting_point=starting_point,
                example_reference=fence(
                    (PROMPTS_DIR / "example_reference.py").read_text(encoding="utf-8"), "python"
                ),
                example_solution=fence(_example_solution(), "python"),
            ),
        ),
    ]


_REVISE_INSTRUCTIONS = {
    "fix": (
        "Fix",
        "The previous program failed. Find the cause in the evidence and fix it; change nothing that "
        "is not needed for the fix. If a kernel cannot be made correct, leave that operator to PyTorch.",
    ),
    "optimize": (
        "Speed up",
        "The previous program is correct. Make it faster, starting with the first suggestion, while "
        "keeping the results within tolerance.",
    ),
    "write": ("Rewrite", "Rewrite the program following the plan, using the feedback."),
}


def coder_revise_messages(
    context: Context, task: Task, plan: Plan, previous: Candidate, feedback: Feedback, mode: str
) -> Messages:
    title, instruction = _REVISE_INSTRUCTIONS.get(mode, _REVISE_INSTRUCTIONS["fix"])
    return [
        _coder_system(context),
        (
            "human",
            fill(
                "coder_revise.md",
                mode_title=title,
                previous_id=previous.id,
                task_name=task.name,
                reference_source=fence(task.source, "python"),
                plan=render_plan(plan),
                previous_source=fence(clip(previous.source, MAX_SOURCE_CHARS), "python"),
                feedback_kind=feedback.kind,
                feedback=render_feedback(feedback),
                instruction=instruction,
            ),
        ),
    ]


def verifier_messages(
    context: Context,
    task: Task,
    plan: Plan,
    candidate: Candidate,
    test: TestResult,
    profile: Profile,
    diagnosis: str,
    notes: Sequence[str],
) -> Messages:
    rendered_notes = "\n\n".join(notes) if notes else "(none retrieved)"
    return [
        ("system", fill("verifier_system.md", **_gpu(context))),
        (
            "human",
            fill(
                "verifier_user.md",
                candidate_id=candidate.id,
                task_name=task.name,
                candidate_summary=candidate.summary or "(no summary)",
                test=render_test(test),
                profile=render_profile(profile),
                diagnosis=diagnosis or "(none)",
                notes=rendered_notes,
                plan=render_plan(plan),
                source=fence(clip(candidate.source, MAX_SOURCE_CHARS), "python"),
            ),
        ),
    ]


def throughput_diagnosis(plan: Plan, test: TestResult) -> str:
    """Achieved FLOP/s and bytes/s from the plan's totals and the measured time, when both exist.

    A stand-in until the verifier node passes its own roofline diagnosis: it tells the model whether
    the program moves bytes or does arithmetic at a rate worth comparing with the GPU's ceilings.
    """
    if not test.candidate_ms or not (plan.total_flops or plan.total_bytes):
        return ""
    seconds = test.candidate_ms / 1000.0
    parts = []
    if plan.total_bytes:
        parts.append(f"{plan.total_bytes / seconds / 1e9:.4g} GB/s of minimum traffic")
    if plan.total_flops:
        parts.append(f"{plan.total_flops / seconds / 1e9:.4g} GFLOP/s")
    if plan.total_flops and plan.total_bytes:
        parts.append(f"arithmetic intensity {plan.total_flops / plan.total_bytes:.3g} FLOP/byte")
    return "Achieved over the whole forward: " + ", ".join(parts) + "."
