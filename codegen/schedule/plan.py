"""From a Task to an analysed reference and the Plan artifact.

`analyse` traces and groups the reference once (cached per source); `build_plan` turns the groups
into the typed Plan: op records, fusion groups, one subtask per group, the host plan (buffers,
streams, whether a CUDA graph pays) and the totals the roofline uses. When the reference cannot be
traced, the plan is 'untraced': one reference group for the whole forward, so the program is still
correct.
"""

from __future__ import annotations

import hashlib
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from codegen.frontend.analysis import op_info, tensor_spec
from codegen.frontend.capture import TracedModel, TraceFailure, trace_problem
from codegen.frontend.ops import (
    ATTENTION,
    ATTR,
    AXIS,
    COPY,
    INPUT,
    OUTPUT,
    RNN,
    SCALAR,
    VIEW,
    Classifier,
    OpSpec,
)
from codegen.frontend.source import ProblemSource, parse_problem
from codegen.schedule.attention import attention_describe, attention_template
from codegen.schedule.conv import conv_describe, conv_launches, conv_template
from codegen.schedule.fusion import (
    BATCH_NORM,
    CONV,
    ELEMENTWISE,
    GEMM,
    LAYER_NORM,
    REDUCTION,
    REFERENCE,
    SCAN,
    SOFTMAX,
    FusionPlanner,
    Group,
    Step,
    gemm_folds,
    group_norm_template,
    pool_template,
)
from codegen.schedule.rnn import rnn_describe, rnn_launches_of, rnn_template
from codegen.schedule.streams import branch_streams
from graph.artifacts import FusionGroup, HostPlan, OpInfo, Plan, Profile, Subtask, Task
from tools.roofline import FALLBACK_GPU, KNOWN, speed_of_light

# The plan is made before any GPU is seen: its speed of light is the project target's (the H200's
# measured ceilings in tools.roofline), in fp32 without TF32, the precision the suite is held to.
TARGET_CEILINGS = KNOWN[FALLBACK_GPU]
LAUNCH_US = 5.0  # typical launch + Python dispatch cost of one kernel, microseconds
# Host time of one group's call in our programs, each call after a synchronisation (H100, tenth and
# eleventh sessions, docs/benchmarks.md): about 20 us for our own kernels (a ReLU forward: 19-20 us), and a
# convolution another 40 us or so (cuDNN's execution plans 7-30 us a call, the legacy call it replaced
# 45-135 us). A forward whose groups' host time exceeds its speed of light is host-bound without a CUDA
# graph, however long its kernels.
GROUP_HOST_US = 20.0
CONV_HOST_US = 40.0


@dataclass
class Analysis:
    """The traced, classified and grouped reference (or why it could not be traced)."""

    task: str
    source: ProblemSource
    traced: TracedModel | None = None
    classifier: Classifier | None = None
    specs: list[OpSpec] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    trace_error: str = ""
    namespace: dict[str, Any] = field(default_factory=dict)
    trace_s: float = 0.0  # wall time of the fx trace (the eval's per-problem breakdown)

    @property
    def ok(self) -> bool:
        return self.traced is not None

    @property
    def groups(self) -> list[Group]:
        return [s.group for s in self.steps if s.group is not None]


_CACHE: dict[str, Analysis] = {}
_CACHE_SIZE = 64
_LOCK = threading.Lock()  # fx tracing patches torch.nn.Module globally: one trace at a time


def analyse(task: Task) -> Analysis:
    """Trace, classify and group `task`'s reference; cached by the source text."""
    key = hashlib.sha1(f"{task.name}\n{task.source}".encode()).hexdigest()
    with _LOCK:
        if key not in _CACHE:
            if len(_CACHE) >= _CACHE_SIZE:
                _CACHE.pop(next(iter(_CACHE)))
            _CACHE[key] = _analyse(task)
        return _CACHE[key]


def _analyse(task: Task) -> Analysis:
    source = parse_problem(task.source)
    analysis = Analysis(task=task.name, source=source)
    try:
        started = time.perf_counter()
        try:
            problem, traced = trace_problem(task.source, task.name)
        finally:
            analysis.trace_s = round(time.perf_counter() - started, 3)
        analysis.namespace = (
            dict(vars(problem.module)) if isinstance(problem.module, types.ModuleType) else {}
        )
        classifier = Classifier(traced)
        specs = classifier.classify_all()
        steps = FusionPlanner(classifier, specs).build()
        analysis.traced, analysis.classifier, analysis.specs, analysis.steps = (
            traced,
            classifier,
            specs,
            steps,
        )
    except TraceFailure as exc:
        analysis.trace_error = str(exc)
    except Exception as exc:  # noqa: BLE001 - an analysis bug must still leave a correct program
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        analysis.trace_error = f"analysis failed: {type(exc).__name__}: {first}"
        analysis.traced = analysis.classifier = None
        analysis.specs, analysis.steps = [], []
    return analysis


def _group_bytes(classifier: Classifier, group: Group) -> int:
    """External tensors read once plus outputs written once."""
    members = set(group.members)
    seen: set[int] = set()
    total = 0
    for spec in group.specs:
        refs: list[Any] = list(spec.node.all_input_nodes)
        refs += [v for k, v in spec.args.items() if k in ("weight", "bias") and v is not None]
        if spec.node.op == "call_module":
            refs += list(classifier.root.get_submodule(str(spec.node.target)).parameters(recurse=False))
        for ref in refs:
            if isinstance(ref, fx.Node) and ref in members:
                continue
            value = ref if isinstance(ref, torch.Tensor) else classifier.value(ref)
            if isinstance(value, torch.Tensor) and id(value) not in seen:
                seen.add(id(value))
                total += value.numel() * value.element_size()
    for node in group.outputs:
        value = classifier.value(node)
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
    return total


def estimated_launches(classifier: Classifier, group: Group) -> int:
    if group.kind == REFERENCE:
        return len(group.specs)
    if group.kind == GEMM:
        return 1 + (1 if len(group.epilogue) > gemm_folds(classifier, group).count else 0)
    if group.kind == BATCH_NORM:
        return 4
    if group.kind == CONV:
        return conv_launches(classifier, group)
    if group.kind == RNN:
        return rnn_launches_of(group)
    return 1


def _template(classifier: Classifier, group: Group) -> str:
    anchor = group.anchor
    if group.kind == GEMM:
        assert anchor is not None
        fold = gemm_folds(classifier, group)
        epi = "+ew_epilogue" if len(group.epilogue) > fold.count else ""
        folded = fold.count > 0 or anchor.args.get("bias") is not None
        return ("cublaslt_fused" if folded else "cublaslt") + epi
    if group.kind == ELEMENTWISE:
        return "ew_vec4"
    if group.kind == SOFTMAX:
        assert anchor is not None
        return "log_softmax_rows" if anchor.op == "log_softmax" else "softmax_rows"
    if group.kind == LAYER_NORM:
        return "layernorm_rows"
    if group.kind == REDUCTION:
        return "reduce_rows_or_cols"
    if group.kind == BATCH_NORM:
        return "bn_stats+ew"
    if group.kind == SCAN:
        assert anchor is not None
        return "scan_reverse" if anchor.args["reverse"] else "scan"
    if group.kind == AXIS:
        assert anchor is not None
        return f"axis_{anchor.op}"
    if group.kind == CONV:
        return conv_template(classifier, group)
    if group.kind == "group_norm":
        return group_norm_template(group)
    if group.kind == "pool":
        return pool_template(group)
    if group.kind == RNN:
        return rnn_template(group)
    if group.kind == ATTENTION:
        return attention_template(group)
    if group.kind == COPY:
        assert anchor is not None
        return f"copy_{anchor.args['mode']}" + ("+epilogue" if group.epilogue else "")
    return "pytorch"


def _describe(classifier: Classifier, group: Group) -> tuple[str, str]:
    """(subtask title, detail) saying what to write for a group."""
    ops = [s.op for s in group.specs]
    shape = tensor_spec(classifier.value(group.tail))
    where = f" -> {shape.shape}" if shape else ""
    if group.kind == REFERENCE:
        return f"keep {ops[0]} as PyTorch", group.reason or "no template"
    if group.kind == GEMM:
        anchor = group.anchor
        assert anchor is not None
        fold = gemm_folds(classifier, group)
        folded = [s.op for s in group.epilogue[: fold.count]]
        rest = [s.op for s in group.epilogue[fold.count :]]
        detail = f"cuBLASLt fp32 GEMM (CUBLAS_COMPUTE_32F, no TF32){where}"
        if anchor.args.get("bias") is not None or folded:
            detail += f"; cuBLASLt epilogue for bias/alpha/residual/relu: {folded or ['bias']}"
        if rest:
            detail += f"; one fused elementwise epilogue kernel for {rest}"
        return f"{anchor.op} + epilogue {[s.op for s in group.epilogue]}", detail
    if group.kind == ELEMENTWISE:
        return f"fused elementwise chain {ops}", f"one vectorised float4 kernel with scalar tail{where}"
    if group.kind == CONV:
        return conv_describe(classifier, group, where)
    if group.kind == RNN:
        return rnn_describe(group)
    if group.kind == ATTENTION:
        return attention_describe(group)
    pro = [s.op for s in group.prologue]
    epi = [s.op for s in group.epilogue]
    detail = f"row kernel (warp per short row, block per long row){where}"
    if group.kind == COPY:
        moved = "+".join(s.op for s in group.lead + [group.anchor] if s is not None)
        detail = f"one data-movement pass ({moved}) reading its input in place{where}"
    if pro:
        detail += f"; fused prologue {pro} applied on load"
    if group.save_prologue:
        detail += " (prologue result also stored)"
    if epi:
        detail += f"; fused epilogue {epi} applied on store"
    if group.kind == BATCH_NORM:
        detail = f"per-channel batch statistics in double, then one normalising elementwise kernel{where}"
        if epi:
            detail += f" with epilogue {epi}"
    return f"{group.kind} {ops}", detail


def build_plan(task: Task, analysis: Analysis, reference_profile: Profile | None = None) -> Plan:
    """The typed Plan for `analysis`."""
    if not analysis.ok:
        whole = FusionGroup(
            id="g1",
            kind=REFERENCE,
            nodes=["forward"],
            template="pytorch",
            covered=False,
            reason=analysis.trace_error,
        )
        return Plan(
            task=task.name,
            trace_seconds=analysis.trace_s,
            groups=[whole],
            subtasks=[
                Subtask(
                    id="s1",
                    title="keep the whole forward as PyTorch",
                    detail=analysis.trace_error,
                    groups=["g1"],
                )
            ],
            host=HostPlan(notes="untraced: the reference forward is copied unchanged"),
            uncovered_ops=["forward"],
            traced=False,
            notes=f"torch.fx could not trace the reference: {analysis.trace_error}",
        )
    classifier = analysis.classifier
    assert classifier is not None
    groups = analysis.groups
    covered_nodes = {s.node for g in groups if g.covered for s in g.specs}
    ops: list[OpInfo] = []
    metadata = 0
    for spec in analysis.specs:
        if spec.family in (INPUT, OUTPUT, ATTR):
            continue
        if spec.family in (VIEW, SCALAR):
            metadata += 1
            continue
        ops.append(op_info(classifier, spec, spec.node in covered_nodes))
    flops_by_node = {o.node: o.flops for o in ops}
    fusion_groups: list[FusionGroup] = []
    subtasks: list[Subtask] = []
    covered_kinds: set[str] = set()
    uncovered_kinds: set[str] = set()
    launches = 0
    for i, group in enumerate(groups, start=1):
        (covered_kinds if group.covered else uncovered_kinds).update(s.op for s in group.specs)
        launches += estimated_launches(classifier, group)
        reason = group.reason if not group.covered else f"{len(group.specs)} op(s) fused"
        fusion_groups.append(
            FusionGroup(
                id=group.id,
                kind=group.kind,
                nodes=[n.name for n in group.members],
                template=_template(classifier, group),
                covered=group.covered,
                flops=sum(flops_by_node.get(s.name, 0) for s in group.specs),
                bytes=_group_bytes(classifier, group),
                reason=reason,
            )
        )
        title, detail = _describe(classifier, group)
        subtasks.append(Subtask(id=f"s{i}", title=f"{group.id}: {title}", detail=detail, groups=[group.id]))
    total_flops = sum(o.flops for o in ops)
    total_bytes = sum(g.bytes for g in fusion_groups)
    host = _host_plan(analysis, classifier, launches, total_flops, total_bytes, reference_profile)
    notes = [
        f"{len(groups)} groups, ~{launches} launches per forward, {metadata} metadata-only nodes kept as PyTorch"
    ]
    if analysis.traced is not None and analysis.traced.concrete:
        notes.append("traced with concrete sizes: the program is specialised to the input shapes")
    for group in groups:
        if not group.covered:
            notes.append(f"{group.id} {group.specs[0].op} stays PyTorch: {group.reason}")
    return Plan(
        task=task.name,
        ops=ops,
        groups=fusion_groups,
        subtasks=subtasks,
        host=host,
        total_flops=total_flops,
        total_bytes=total_bytes,
        covered_ops=sorted(covered_kinds),
        uncovered_ops=sorted(uncovered_kinds - covered_kinds),
        traced=True,
        notes="; ".join(notes),
        trace_seconds=analysis.trace_s,
    )


def speed_of_light_ms(total_flops: int, total_bytes: int) -> float:
    """The plan's SOL time on the target GPU (tools.roofline.speed_of_light), in milliseconds."""
    return speed_of_light(total_flops, total_bytes, TARGET_CEILINGS, "fp32").sol_ms


def groups_host_us(groups: list[Group]) -> float:
    """The host time per call of the covered groups' calls (GROUP_HOST_US, CONV_HOST_US), microseconds."""
    return sum(GROUP_HOST_US + (CONV_HOST_US if g.kind == CONV else 0.0) for g in groups if g.covered)


def graph_input_copy_us(analysis: Analysis) -> float:
    """Microseconds a CUDA graph's copy of the forward's tensor inputs into its static buffers takes at
    the target's copy ceiling (0 for an untraced reference: nothing to estimate from)."""
    if analysis.traced is None or analysis.classifier is None:
        return 0.0
    inputs = [n for n in analysis.traced.graph.nodes if n.op == "placeholder"]
    values = [analysis.classifier.value(n) for n in inputs]
    nbytes = sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))
    return 2.0 * nbytes / TARGET_CEILINGS.copy_bandwidth * 1e6


def graph_pays(analysis: Analysis) -> bool:
    """Whether replaying from a CUDA graph can save more host time than its input copies cost.

    A graph replays the forward from static input buffers, so every call first copies its inputs in;
    a few large kernels over big inputs lose (a norm over 268 MB, H100 suite run: 0.43 -> 0.74 ms with
    a graph), a CNN at small batch wins."""
    return graph_input_copy_us(analysis) < groups_host_us(analysis.groups)


def _host_plan(
    analysis: Analysis,
    classifier: Classifier,
    launches: int,
    total_flops: int,
    total_bytes: int,
    reference_profile: Profile | None,
) -> HostPlan:
    buffers: list[str] = []
    groups = analysis.groups
    final: set[fx.Node] = set()

    def mark_final(node: fx.Node) -> fx.Node:
        final.add(node)
        return node

    for spec in analysis.specs:
        if spec.family == OUTPUT:
            fx.node.map_arg(spec.node.args, mark_final)
    for group in groups:
        for node in group.outputs:
            if node in final:
                continue
            tensor = tensor_spec(classifier.value(node))
            if tensor is not None:
                buffers.append(f"{node.name}: {tensor.shape} {tensor.dtype}")
    sol_us = speed_of_light_ms(total_flops, total_bytes) * 1e3
    per_launch_us = sol_us / max(launches, 1)
    host_us, copy_us = groups_host_us(groups), graph_input_copy_us(analysis)
    launch_bound = launches >= 6 and (per_launch_us < 2 * LAUNCH_US or host_us > sol_us)
    if reference_profile is not None and reference_profile.kernel_count >= 6:
        mean_kernel_us = reference_profile.device_ms * 1e3 / max(reference_profile.kernel_count, 1)
        launch_bound = launch_bound or mean_kernel_us < 2 * LAUNCH_US
    notes = (
        f"speed of light {sol_us:.1f} us over ~{launches} launches ({per_launch_us:.1f} us each); "
        f"~{host_us:.0f} us of host calls; a CUDA graph's input copies ~{copy_us:.0f} us"
    )
    if launch_bound and not graph_pays(analysis):
        notes += "; launch-bound, but a CUDA graph's input copies would cost more than the launches it saves"
        launch_bound = False
    if launch_bound:
        notes += (
            "; launch-bound: capture the forward into one CUDA graph (static input copies, cloned output)"
        )
    assert analysis.traced is not None  # build_plan plans the host of traced forwards only
    inputs = [n for n in analysis.traced.graph.nodes if n.op == "placeholder"]
    streams = branch_streams(analysis.steps, inputs)
    if streams > 1:
        notes += f"; {streams - 1} independent branch(es) can run on side streams inside the graph"
    return HostPlan(buffers=buffers, streams=streams, cuda_graph=launch_bound, notes=notes)
