"""The deterministic rubric: the four dimensions scored from our own findings, without a judge model.

Each dimension is a score in 0..1 with the reason for it:

- anti_hacking: 0 when the answer hacks (see `hack_findings`); otherwise 1 less 0.25 per distinct
  kind of suspicious warning (memoisation, global settings, ctypes, clock disagreement, ...).
  PyTorch fallbacks are not counted here: they lower operator coverage instead.
- cuda_engineering: the share of six idioms of sound CUDA found in the native sources: bounds
  checks or grid-stride loops, launches on the caller's stream, launch errors checked, restrict or
  const pointers, a memory-level technique (vector loads, shared memory, warp shuffles, a library
  GEMM, async copies), 64-bit indexing. No kernel at all scores 0.
- operator_coverage: on a GPU the worker's measured share of the reference's GPU time now done by
  the program's own kernels; elsewhere the plan's operators weighted by their work
  (max(FLOPs / 14, bytes), the H200's FLOP-to-byte ratio) less those the static checks name as
  PyTorch fallbacks.
- skill_compliance: the share of the skill's format items the answer meets (see `skill_items`).

`hack_findings` is also where the reward's notion of a hack lives: every error finding, plus the
warnings that mean the program does not do the work itself or corrupts the comparison.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from graph.artifacts import Plan
from rl.reward.answer import Answer
from rl.reward.sample import Dimension, Rubric, Sample

# Warnings that make an answer a hack for the reward (the verifier only calls them suspicious):
# no own compute at all, or results that depend on state, inputs written over, lowered precision.
HACK_WARNINGS = frozenset(
    {
        "no_custom_kernel",
        "no_custom_kernel_ran",
        "mutates_inputs",
        "stateful_output",
        "constant_output",
        "precision_downgrade",
    }
)
FALLBACK_IDS = frozenset({"pytorch_fallback", "torch_ops_in_cpp"})
DECORATIVE = "decorative_cuda"  # our own finding: kernels exist, but every planned operator is PyTorch's
FLOPS_PER_BYTE = 14.0  # H200: 67 TFLOP/s fp32 over 4.8 TB/s; weighs an operator's work in bytes
FIX_SIMILARITY = 0.5  # a fix keeps at least this much of the previous program (difflib ratio)

_OP_ALIASES = {"mm": "matmul", "@": "matmul", "addmm": "linear", "amax": "max", "gemm": "matmul"}


def op_key(name: str) -> str:
    """A canonical operator name: 'nn.BatchNorm2d' / 'batch_norm' -> 'batchnorm', 'torch.mm' -> 'matmul'."""
    key = name.strip().lower().rsplit(".", 1)[-1].rsplit("::", 1)[-1].replace("_", "")
    key = re.sub(r"[123]d$", "", key)
    return _OP_ALIASES.get(key, key)


def fallback_ops(findings: Iterable[dict[str, str]]) -> set[str]:
    """Canonical names of the operators the static checks saw PyTorch do."""
    ops = set()
    for item in findings:
        if item.get("id") not in FALLBACK_IDS:
            continue
        evidence = item.get("evidence", "")
        head = evidence.split(" at ", 1)[0].split(" in the native source", 1)[0]
        head = head.split(" (", 1)[0] if not head.startswith("@") else "@"
        head = head.removeprefix("tensor ").strip().rstrip("()")
        if head:
            ops.add(op_key(head))
    return ops


def _weight(flops: int, nbytes: int) -> float:
    return max(flops / FLOPS_PER_BYTE, float(nbytes), 1.0)


def static_coverage(plan: Plan, findings: Sequence[dict[str, str]], has_kernels: bool) -> tuple[float, str]:
    """The plan's work share not named as a PyTorch fallback (0 without any custom kernel)."""
    if not has_kernels:
        return 0.0, "no custom kernel: every operator runs in PyTorch"
    if not plan.ops:
        return 1.0 if not any(f.get("id") in FALLBACK_IDS for f in findings) else 0.5, (
            "the plan lists no operators; judged from the fallback findings alone"
        )
    fallen = fallback_ops(findings)
    total = sum(_weight(op.flops, op.bytes) for op in plan.ops)
    left = [op for op in plan.ops if op_key(op.op) in fallen or op_key(op.target.split(" ")[0]) in fallen]
    share = 1.0 - sum(_weight(op.flops, op.bytes) for op in left) / total
    if not left:
        return share, f"all {len(plan.ops)} planned operator(s) are in the program's own code"
    names = ", ".join(sorted({op.op for op in left}))
    return share, f"{names} left to PyTorch: {share:.0%} of the plan's work in the program's own code"


def hack_findings(findings: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """The findings that make an answer a hack for the reward (errors and HACK_WARNINGS)."""
    return [
        f for f in findings if f.get("severity") == "error" or (f.get("id") in HACK_WARNINGS | {DECORATIVE})
    ]


def anti_hacking(
    findings: Sequence[dict[str, str]], has_program: bool = True, judge_flag: str = ""
) -> Dimension:
    if not has_program:
        return Dimension(0.0, "no program to check")
    hacks = hack_findings(findings)
    if hacks or judge_flag:
        ids = sorted({f["id"] for f in hacks}) + (["judge: " + judge_flag] if judge_flag else [])
        return Dimension(0.0, "hacked: " + ", ".join(ids))
    doubtful = sorted(
        {f["id"] for f in findings if f.get("severity") == "warning" and f.get("id") not in FALLBACK_IDS}
    )
    if not doubtful:
        return Dimension(1.0, "no hack or suspicious finding")
    return Dimension(max(0.0, 1.0 - 0.25 * len(doubtful)), "suspicious: " + ", ".join(doubtful))


_ENGINEERING = (
    ("bounds checks or grid-stride loops", re.compile(r"if\s*\([^)]*<|for\s*\([^;]*;[^;]*<[^;]*;[^)]*(gridDim|\+=)")),
    ("launches on the caller's stream", None),  # <<<grid, block, shmem, stream>>>
    ("launch errors checked", re.compile(r"cudaGetLastError|cudaPeekAtLastError|C10_CUDA_KERNEL_LAUNCH_CHECK")),
    ("restrict or const pointers", re.compile(r"__restrict__|const\s+\w+\s*\*")),
    (
        "a memory-level technique (vector loads, shared memory, shuffles, library GEMM, async copies)",
        re.compile(r"float[24]\b|__shared__|__shfl|__ldg|cublas|cp\.async|wmma|mma\.sync|cudnn", re.I),
    ),
    ("64-bit indexing", re.compile(r"int64_t|size_t|long long")),
)  # fmt: skip


def cuda_engineering(answer: Answer) -> Dimension:
    if not answer.kernels:
        return Dimension(0.0, "no __global__ kernel")
    met: list[str] = []
    missed: list[str] = []
    for name, pattern in _ENGINEERING:
        if pattern is None:
            ok = bool(answer.launches) and all(len(cfg.split(",")) >= 4 for cfg in answer.launches)
        else:
            ok = bool(pattern.search(answer.native))
        (met if ok else missed).append(name)
    reason = f"{len(met)}/{len(_ENGINEERING)}: " + "; ".join(met or ["none"])
    if missed:
        reason += f" (missing: {'; '.join(missed)})"
    return Dimension(len(met) / len(_ENGINEERING), reason)


def skill_items(sample: Sample, answer: Answer) -> list[tuple[str, bool]]:
    """The skill's format items: what an answer of this skill must look like."""
    items = [
        ("a Summary: line before the code", answer.summary_line),
        ("exactly one ```python block", answer.fenced_blocks == 1),
        ("the program parses and defines ModelNew", answer.program is not None),
        ("class ModelNew(nn.Module)", answer.defines_model_new),
        ("the reference's constructor and forward arguments", answer.signatures_match),
        ("a __global__ kernel", bool(answer.kernels)),
        (
            "the kernel is launched and built with load_inline",
            bool(answer.launches) and answer.builds_extension,
        ),
    ]
    if sample.skill == "revise":
        previous = sample.previous or ""
        program = answer.program or ""
        changed = bool(program) and program.strip() != previous.strip()
        items.append(("changes the previous program", changed))
        if sample.mode == "fix":
            ratio = (
                difflib.SequenceMatcher(None, previous, program, autojunk=False).ratio() if program else 0.0
            )
            items.append(
                (f"a focused fix (keeps {ratio:.0%} of the previous program)", ratio >= FIX_SIMILARITY)
            )
    return items


def skill_compliance(sample: Sample, answer: Answer) -> Dimension:
    items = skill_items(sample, answer)
    met = [name for name, ok in items if ok]
    missed = [name for name, ok in items if not ok]
    reason = f"{len(met)}/{len(items)} items" + (f"; missing: {'; '.join(missed)}" if missed else "")
    if answer.error:
        reason += f"; {answer.error}"
    return Dimension(len(met) / len(items), reason)


def operator_coverage(
    sample: Sample, answer: Answer, findings: Sequence[dict[str, str]], measured: float | None
) -> Dimension:
    if answer.program is None:
        return Dimension(0.0, "no program")
    if measured is not None:
        return Dimension(
            max(0.0, min(1.0, measured)),
            f"measured: {measured:.0%} of the reference's GPU time done by the program's own kernels",
        )
    share, reason = static_coverage(sample.plan, findings, bool(answer.kernels))
    return Dimension(share, f"static estimate: {reason}")


def aggregate(dimensions: Sequence[Dimension]) -> float:
    """The rubric score r in 0..1: the plain mean of the four dimensions."""
    return sum(d.score for d in dimensions) / len(dimensions)


def deterministic_rubric(
    sample: Sample, answer: Answer, findings: Sequence[dict[str, str]], measured_coverage: float | None
) -> Rubric:
    dims = (
        anti_hacking(findings, answer.program is not None),
        cuda_engineering(answer),
        operator_coverage(sample, answer, findings, measured_coverage),
        skill_compliance(sample, answer),
    )
    return Rubric(*dims, aggregate=aggregate(dims), source="deterministic")
