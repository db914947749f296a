"""Fix mode: find the group a failure belongs to and demote it one level.

Build errors carry line numbers of the generated cuda.cu / main.cpp; the `// group <id>` and
`// lib <name>` markers there name the owning groups. Runtime errors raised by our binding say
"stitch group <id> (...) failed". When nothing locates the failure, the CUDA graph (if any) is
switched off first, then the most complex covered group is demoted (gemm before batch_norm before
row ops before elementwise chains).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from codegen.emit.assemble import Options, Program
from codegen.emit.cuda_unit import locate_groups
from codegen.schedule.fusion import COMPLEXITY, LEVEL_NAMES, REFERENCE, Group
from graph.artifacts import Feedback

# nvcc: "cuda.cu(12): error"; g++: "main.cpp:12:3: error"; tools/build/'s #line labels:
# "cuda_sources(12)" / "cpp_sources:12:3". Line 1 is the first line of the CUDA_SRC / CPP_SRC literal.
_LINE = re.compile(r"(cuda\.cu|main\.cpp|cuda_sources|cpp_sources)(?:\((\d+)\)|:(\d+))")
_CUDA_FILES = ("cuda.cu", "cuda_sources")
_GROUP = re.compile(r"stitch group ((?:g[\d.]+\s*)+)")
_LIB_KIND: dict[str, tuple[str, ...]] = {
    "gemm": ("gemm", "conv"),  # pointwise convolutions may call it (templates/conv.cuh)
    "batchnorm": ("batch_norm",),
    "softmax": ("softmax",),
    "layernorm": ("layer_norm",),
    "conv": ("conv",),
    "conv_engine": ("conv",),
    "conv_dw": ("conv",),
    "pool": ("pool",),
    "groupnorm": ("group_norm",),
}
_LIB_KIND |= {
    "reduce": ("reduction",),
    "axis": ("axis",),
    "elementwise": ("elementwise", "batch_norm", "gemm", "softmax", "layer_norm", "conv", "group_norm"),
}


@dataclass
class Repair:
    """What a fix changed, for the candidate's summary and meta."""

    options: Options
    summary: str
    demoted: list[dict[str, object]]
    changed: bool


def failing_groups(feedback: Feedback, program: Program, groups: list[Group]) -> list[str]:
    """Base group ids the evidence points at (possibly empty)."""
    text = f"{feedback.summary}\n{feedback.evidence}"
    found: list[str] = []

    def add(gid: str) -> None:
        base = gid.split(".")[0]
        if base not in found:
            found.append(base)

    for match in _GROUP.finditer(text):
        for gid in match.group(1).split():
            add(gid)
    for match in _LINE.finditer(text):
        source = program.cuda_src if match.group(1) in _CUDA_FILES else program.cpp_src
        line = int(match.group(2) or match.group(3))
        owner = locate_groups(source, line)
        if owner is None:
            continue
        kind, names = owner
        if kind == "group":
            for gid in names:
                add(gid)
        else:
            kinds: set[str] = set()
            for lib in names:
                kinds.update(_LIB_KIND.get(lib, ()))
            for group in groups:
                if group.kind in kinds:
                    add(group.id)
    for library, kind in (("cublas", "gemm"), ("cudnn", "conv")):
        if not found and re.search(library, text, re.IGNORECASE):
            for group in groups:
                if group.kind == kind:
                    add(group.id)
    return found


def _most_complex(groups: list[Group], levels: dict[str, int]) -> Group | None:
    live = [g for g in groups if g.kind != REFERENCE and levels.get(g.id, 0) < 2]
    if not live:
        return None
    return max(live, key=lambda g: (COMPLEXITY.get(g.kind, 0), len(g.specs), -levels.get(g.id, 0)))


def plan_fix(
    feedback: Feedback,
    program: Program,
    groups: list[Group],
    options: Options,
    has_split_form: Callable[[Group], bool] = lambda g: True,
) -> Repair:
    """The next program options after `feedback` reported a failure of `program`.

    A group whose split form is the same code as its fused form goes straight to PyTorch.
    """
    levels = dict(options.levels)
    by_id = {g.id: g for g in groups}
    targets = [gid for gid in failing_groups(feedback, program, groups) if gid in by_id]
    targets = [gid for gid in targets if by_id[gid].kind != REFERENCE and levels.get(gid, 0) < 2]
    located = bool(targets)
    if options.streams and feedback.kind != "build_error":  # the newest, least proven option goes first
        new = replace(options, streams=False, levels=levels)
        return Repair(new, "fix: side streams switched off (the branches run on one stream again)", [], True)
    if not targets and options.cuda_graph and feedback.kind != "build_error":
        new = replace(options, cuda_graph=False, levels=levels)
        return Repair(new, "fix: CUDA-graph capture switched off (failure not located in a group)", [], True)
    if not targets:
        group = _most_complex(groups, levels)
        if group is None:
            return Repair(options, "no further fix: every group is already PyTorch", [], False)
        targets = [group.id]
    demoted: list[dict[str, object]] = []
    for gid in targets:
        before = levels.get(gid, 0)
        after = min(before + 1, 2)
        if after == 1 and not has_split_form(by_id[gid]):
            after = 2
        levels[gid] = after
        demoted.append(
            {
                "group": gid,
                "kind": by_id[gid].kind,
                "from": LEVEL_NAMES[before],
                "to": LEVEL_NAMES[after],
                "reason": feedback.kind
                + (" located by markers" if located else " not located: most complex group"),
            }
        )
    names = ", ".join(f"{d['group']} ({d['kind']}) {d['from']} -> {d['to']}" for d in demoted)
    new = replace(options, levels=levels)
    return Repair(new, f"fix ({feedback.kind}): demoted {names}", demoted, True)
