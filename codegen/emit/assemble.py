"""Assemble a complete, standalone program (docs/program-format.md) from an analysed reference.

Layout of the generated file: imports; the runtime helpers it needs (copied from
codegen/emit/runtime.py); CUDA_SRC (torch-free kernels with `// group <id>` markers); CPP_SRC
(pybind11-only binding); the load_inline build; the problem's own top-level code (constants, helper
classes); one Python helper per covered group; and `class ModelNew` whose __init__ is the reference's
(same parameters, same order) and whose forward runs the groups in order, keeping reference groups
as the original PyTorch calls. The program imports only torch and the standard library.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import torch
import torch.fx as fx

from codegen.emit.attention import write_attention
from codegen.emit.axis import write_axis
from codegen.emit.chain import CodegenError
from codegen.emit.conv import write_conv
from codegen.emit.cuda_unit import CudaUnit
from codegen.emit.expressions import ExprError
from codegen.emit.kernels import BN_OF_CONCAT, GroupWriter
from codegen.emit.layout import write_copy
from codegen.emit.norm import write_norm
from codegen.emit.norm_concat import write_batch_norm_of_concat
from codegen.emit.pool import write_pool
from codegen.emit.rnn import write_rnn
from codegen.emit.runtime import STITCH_LAUNCH_CHOICES
from codegen.emit.scan import write_scan
from codegen.emit.streams import on_streams
from codegen.emit.torch_calls import EmitError, ForwardEmitter
from codegen.frontend.ops import ATTENTION, AXIS, CONV, COPY, NORM, POOL, RNN, SCAN
from codegen.frontend.source import indent
from codegen.schedule.demotion import realize
from codegen.schedule.fusion import REFERENCE, Group, Step
from codegen.schedule.plan import Analysis
from codegen.schedule.precision import tf32_matched_levels
from codegen.schedule.streams import StreamStep, plan_streams, step_of

RUNTIME_FILES = (Path(__file__).parent / "runtime.py", Path(__file__).parent / "conv_runtime.py")
CORE_HELPERS = (
    "_stitch_cuda_lib_paths",
    "_stitch_build",
    "_stitch_stream",
    "_stitch_same_shape",
    "_stitch_bc",
)
GEMM_HELPERS = ("_stitch_span_stride", "_stitch_batch_split", "_stitch_mat", "_stitch_mm")
VIEW_HELPERS = ("_STITCH_VIEW_DIMS", "_stitch_dims", "_stitch_view")  # tensors read through their strides
CONV_HELPERS = (
    "_STITCH_CONV_WORKSPACES",
    "_stitch_conv_out_size",
    "_stitch_conv3",
    "_STITCH_CONV_SHAPES",
    "_stitch_conv_shape",
    "_stitch_conv",
)
CUDNN_BUILD_HELPERS = ("_stitch_cudnn_paths",)
FAMILY_WRITERS = {
    CONV: write_conv,
    POOL: write_pool,
    NORM: write_norm,
    SCAN: write_scan,
    RNN: write_rnn,
    ATTENTION: write_attention,
    AXIS: write_axis,
    COPY: write_copy,
    BN_OF_CONCAT: write_batch_norm_of_concat,
}  # group kinds written outside codegen.emit.kernels
GRAPH_HELPERS = ("_stitch_restore_buffers", "_StitchGraphRunner", "_stitch_clone")
LAUNCH_HELPERS = ("STITCH_LAUNCH_CHOICES", "_STITCH_LAUNCH_STATE", "stitch_set_launch")


@dataclass
class Options:
    """Program-level knobs the policy may change between candidates."""

    arch: str = "sm_90"
    cuda_graph: bool = False
    ew_unroll: int = 1
    levels: dict[str, int] = field(default_factory=dict)
    # with cuda_graph: independent branches on side streams inside the graph (codegen/schedule/streams.py)
    streams: bool = False
    # group id -> launch knob -> value, written into the program's STITCH_LAUNCH table over the
    # defaults (the autotuner's choices, docs/autotuning.md)
    launch: dict[str, dict[str, int]] = field(default_factory=dict)

    def dump(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "cuda_graph": self.cuda_graph,
            "ew_unroll": self.ew_unroll,
            "streams": self.streams,
            "levels": dict(self.levels),
            "launch": {g: dict(k) for g, k in self.launch.items()},
        }


@dataclass
class Program:
    """A generated program and what it is made of."""

    source: str
    templates: dict[str, str]  # effective group id -> template / strategy
    covered_ops: list[str]
    uncovered_ops: list[str]
    cuda_src: str = ""
    cpp_src: str = ""
    launches: int = 0
    options: Options = field(default_factory=Options)
    auto_demoted: list[str] = field(default_factory=list)  # groups the writer could not express
    streams: int = 1  # streams the forward's independent branches could use (1: one chain)


def arch_digits(arch: str) -> str:
    """'sm_90' -> '90', 'sm_90a' -> '90a'; one-line error for anything else."""
    match = re.fullmatch(r"(?:sm_|compute_)?(\d+[a-z]?)", arch.strip())
    if not match:
        raise ValueError(f"gpu_arch {arch!r} is not of the form sm_XY")
    return match.group(1)


def _runtime_source(names: tuple[str, ...]) -> str:
    """The functions, classes and module-level assignments called `names`, from the runtime files."""
    found: dict[str, str] = {}
    for path in RUNTIME_FILES:
        text = path.read_text()
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                name = node.name
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                name = node.target.id
            else:
                continue
            segment = ast.get_source_segment(text, node)
            if name in names and segment is not None:
                found[name] = segment
    missing = [n for n in names if n not in found]
    if missing:
        raise RuntimeError(f"the runtime files lack {missing}")
    return "\n\n\n".join(found[n] for n in names)


def _extension_name(task: str, cuda_src: str, cpp_src: str) -> str:
    digest = hashlib.sha1((cuda_src + cpp_src).encode()).hexdigest()[:12]
    stem = re.sub(r"[^A-Za-z0-9_]", "_", task)[:40]
    return f"stitch_{stem}_{digest}"


class GroupCodeError(ValueError):
    """One group's code could not be written; `group` is its base id."""

    def __init__(self, group: str, message: str) -> None:
        super().__init__(f"{group}: {message}")
        self.group = group


def assemble(analysis: Analysis, options: Options) -> Program:
    """The whole program; a group whose code cannot be written is demoted to PyTorch (recorded in
    `Program.auto_demoted`), and a forward that cannot be regenerated falls back to the untraced copy."""
    if not analysis.ok:
        return _untraced_program(analysis, options)
    levels = dict(options.levels)
    demoted: list[str] = []
    for _ in range(len(analysis.groups) + 1):
        attempt = replace(options, levels=dict(levels))
        try:
            program = _assemble_traced(analysis, attempt)
        except GroupCodeError as exc:
            levels[exc.group] = 2
            demoted.append(str(exc))
            continue
        except (EmitError, CodegenError, ExprError) as exc:
            program = _untraced_program(
                analysis, options, reason=f"the forward could not be regenerated: {exc}"
            )
        program.auto_demoted = demoted
        return program
    return _untraced_program(analysis, options, reason="no group could be written")


@dataclass
class _Forward:
    """What writing one forward body produced (the fast body and the TF32-matched one share it)."""

    helpers: list[str] = field(default_factory=list)
    helper_names: dict[str, str] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)
    covered: set[str] = field(default_factory=set)
    uncovered: set[str] = field(default_factory=set)
    launches: int = 0
    launch: dict[str, dict[str, int]] = field(default_factory=dict)  # group id -> knob -> default
    streams: int = 1  # streams the forward's steps were placed on (codegen/schedule/streams.py)
    weight: dict[str, int] = field(default_factory=dict)  # group id -> elements it writes


def _assemble_traced(analysis: Analysis, options: Options) -> Program:
    traced, classifier = analysis.traced, analysis.classifier
    assert traced is not None and classifier is not None
    if traced.state_writes and options.cuda_graph:  # a graph replay would skip the attribute stores
        options = replace(options, cuda_graph=False)
    emitter = ForwardEmitter(traced.graph, analysis.source.forward_params, analysis.namespace)
    unit = CudaUnit()
    writer = GroupWriter(
        classifier, unit, emitter.names, ew_unroll=options.ew_unroll, family_writers=FAMILY_WRITERS
    )
    body: list[str] = []
    if traced.concrete:
        for node, value in zip(
            [n for n in traced.graph.nodes if n.op == "placeholder"], traced.input_values, strict=True
        ):
            if isinstance(value, torch.Tensor):
                body.append(f"_stitch_expect({emitter.names[node]}, {tuple(int(s) for s in value.shape)!r})")
    for name, default in traced.defaults.items():
        body.append(f"_stitch_expect_default({name}, {default!r}, {name!r})")
    fast = _Forward()
    inputs = [n for n in traced.graph.nodes if n.op == "placeholder"]
    streams = options.streams and options.cuda_graph and not _has_inplace(analysis)
    fast_body = _write_body(realize(analysis.steps, options.levels), emitter, writer, fast, inputs, streams)
    matched_levels = tf32_matched_levels(analysis.steps, options.levels)
    matched_body: list[str] | None = None
    if matched_levels is not None:
        # Same unit, emitter and helper table: the matched body reuses the fast body's helpers.
        matched = _Forward(
            helpers=fast.helpers, helper_names=fast.helper_names, launch=fast.launch, weight=fast.weight
        )
        matched_body = _write_body(realize(analysis.steps, matched_levels), emitter, writer, matched, inputs)
        body.append(
            "if torch.backends.cudnn.allow_tf32:  # keep the reference's TF32 rounding (codegen.schedule.precision)"
        )
        body.append(f"    return self._stitch_forward_tf32({', '.join(analysis.source.forward_params)})")
    output = next(n for n in traced.graph.nodes if n.op == "output")
    ending = _return_statements(emitter, output, traced.state_writes)
    body += fast_body + ending
    if matched_body is not None:
        matched_body += ending
    # The literals start with a newline; cuda.cu / main.cpp are exactly these strings, so compiler
    # line numbers index them directly.
    cuda_src = "" if unit.empty else "\n" + unit.cuda_source()
    cpp_src = "" if unit.empty else "\n" + unit.cpp_source()
    uses_gemm = "gemm" in unit.libs
    uses_cudnn = "conv" in unit.libs
    source = _program_text(
        analysis,
        options,
        body,
        fast.helpers,
        cuda_src,
        cpp_src,
        uses_gemm,
        traced.concrete,
        matched_body,
        uses_cudnn,
        tuple(sorted(emitter.runtime_helpers)),
        launch_table(fast.launch, options.launch, fast.weight),
    )
    return Program(
        source=source,
        templates=fast.templates,
        covered_ops=sorted(fast.covered),
        uncovered_ops=sorted(fast.uncovered - fast.covered),
        cuda_src=cuda_src,
        cpp_src=cpp_src,
        launches=fast.launches,
        streams=fast.streams,
        options=options,
    )


def launch_table(
    defaults: dict[str, dict[str, int]],
    chosen: dict[str, dict[str, int]],
    weight: dict[str, int] | None = None,
) -> dict[str, dict[str, int]]:
    """The program's STITCH_LAUNCH: every tunable group's defaults, with the chosen values over them,
    the groups that write the most elements first (the tuner goes through them in this order, so a
    budget too short for all of them is spent where the time is).

    A choice for a group or knob the program does not have, or a value outside the knob's choices,
    is ignored: the choices come from tuning another candidate, and the default stays correct.
    """
    order = sorted(defaults, key=lambda g: -(weight or {}).get(g, 0))  # stable: program order on ties
    table = {g: dict(defaults[g]) for g in order}
    for group, knobs in chosen.items():
        for knob, value in knobs.items():
            allowed = STITCH_LAUNCH_CHOICES.get(knob.rsplit(".", 1)[-1], ())
            if group in table and knob in table[group] and value in allowed:
                table[group][knob] = int(value)
    return table


def _return_statements(emitter: ForwardEmitter, output: fx.Node, state_writes: list[str]) -> list[str]:
    """`return result`, after storing the attributes forward assigns (the graph returns their
    final values after the result, codegen.frontend.capture)."""
    if not state_writes:
        return [emitter.statement(output)]
    result, *states = cast(tuple[Any, ...], output.args[0])
    stores = [f"self.{path} = {emitter.arg(node)}" for path, node in zip(state_writes, states, strict=True)]
    return [*stores, f"return {emitter.arg(result)}"]


def _write_body(
    steps: list[Step],
    emitter: ForwardEmitter,
    writer: GroupWriter,
    out: _Forward,
    inputs: list[fx.Node],
    streams: bool = False,
) -> list[str]:
    """The forward's statements for these steps; helpers, templates and coverage accumulate in `out`,
    with the streams its branches could use (`out.streams`); with `streams` they do
    (codegen/schedule/streams.py; `inputs`: the forward's placeholders)."""
    entries: list[tuple[list[str], StreamStep]] = []
    for step in steps:
        placed = step_of(step)  # what it makes and reads; None: fx's unused views, the output
        if placed is None:
            continue
        group: Group | None = step.group
        if group is None:
            assert step.spec is not None
            entries.append(([emitter.statement(step.spec.node)], placed))
            continue
        if group.kind == REFERENCE:
            lines = [f"{emitter.statement(spec.node)}  # {group.id}: PyTorch" for spec in group.specs]
            lines += [emitter.statement(node) for node in group.absorbed]
            entries.append((lines, placed))
            out.uncovered.update(spec.op for spec in group.specs)
            out.templates[group.id] = "pytorch"
            out.launches += len(group.specs)
            continue
        try:
            code = writer.write(group)
        except Exception as exc:  # noqa: BLE001 - any writer failure demotes just this group
            raise GroupCodeError(group.base_id, f"{type(exc).__name__}: {exc}") from exc
        # Groups with identical helpers (an unrolled loop's steps) share one function.
        text = code.helper.source("@HELPER@")
        helper_name = out.helper_names.get(text)
        if helper_name is None:  # a group written differently in the TF32-matched body gets its own name
            taken = set(out.helper_names.values())
            helper_name = code.helper.name
            while helper_name in taken:
                helper_name += "_alt"
            out.helper_names[text] = helper_name
            out.helpers.append(text.replace("@HELPER@", helper_name, 1))
        out.templates[group.id] = code.template
        out.launches += code.launches
        if code.helper.knobs:
            out.launch[group.id] = dict(code.helper.knobs)
            out.weight[group.id] = sum(_numel(writer.classifier.value(n)) for n in group.outputs)
        out.covered.update(s.op for s in group.specs)
        targets = ", ".join(emitter.names[n] for n in group.outputs)
        line = f"{targets} = {helper_name}({', '.join(code.helper.call_args)})  # {group.id}"
        entries.append(([line], placed))
    plan = plan_streams([step for _, step in entries], inputs)
    out.streams = plan.streams
    if not streams or not plan.parallel:
        return [line for lines, _ in entries for line in lines]
    return on_streams([lines for lines, _ in entries], plan, [emitter.names[n] for n in inputs])


def _numel(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (tuple, list)):
        return sum(_numel(v) for v in value)
    return 0


def _has_inplace(analysis: Analysis) -> bool:
    """An in-place op could write a value another stream reads: such forwards stay on one stream."""
    classifier = analysis.classifier
    assert classifier is not None and analysis.traced is not None
    return any(classifier.is_inplace_node(n) for n in analysis.traced.graph.nodes if n.op != "placeholder")


def _header(analysis: Analysis, extra: str) -> list[str]:
    lines = [
        f'"""StitchCUDA program for {analysis.task} (written by the offline policy).',
        "",
        extra,
        '"""',
        # No `from __future__` line: KernelBench's loader puts two lines in front of the program
        # (docs/kernelbench.md §1), so nothing here may depend on being the first statement.
        "import glob",
        "import inspect",
        "import math",
        "import operator",
        "import os",
        "from typing import Any",
        "",
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "from torch.utils.cpp_extension import load_inline",
    ]
    lines += [line for line in analysis.source.imports if not line.lstrip().startswith("from __future__")]
    return lines


def _program_text(
    analysis: Analysis,
    options: Options,
    body: list[str],
    helpers: list[str],
    cuda_src: str,
    cpp_src: str,
    uses_gemm: bool,
    concrete: bool,
    matched_body: list[str] | None = None,
    uses_cudnn: bool = False,
    runtime_helpers: tuple[str, ...] = (),
    launch: dict[str, dict[str, int]] | None = None,
) -> str:
    extra = "Custom CUDA kernels implement the covered fusion groups; the rest stays PyTorch."
    lines = _header(analysis, extra)
    names: tuple[str, ...] = ()
    if cuda_src:
        names += CORE_HELPERS
        if uses_gemm:
            names += GEMM_HELPERS
        if any("_stitch_view(" in helper or "_stitch_dims(" in helper for helper in helpers):
            names += VIEW_HELPERS
        if uses_cudnn:
            names += CUDNN_BUILD_HELPERS + CONV_HELPERS
    elif concrete or options.cuda_graph:
        names += ("_stitch_stream",)
    if concrete:
        names += ("_stitch_expect",)
    if analysis.traced is not None and analysis.traced.defaults:
        names += ("_stitch_expect_default",)
    names += runtime_helpers  # helpers that statements left as PyTorch call (e.g. a demoted pick)
    if options.cuda_graph:
        names += GRAPH_HELPERS
        if options.streams:
            names += ("_StitchStreams",)
    if cuda_src or options.cuda_graph:
        names += LAUNCH_HELPERS
    parts = ["\n".join(lines)]
    if uses_gemm:
        parts.append("_STITCH_RELU = 1  # cuBLASLt epilogue: relu")
    if cuda_src or options.cuda_graph:
        parts.append(
            "# Launch knobs per fusion group, read at every call; the autotuner times the choices on the\n"
            "# GPU and the coder writes the fastest back here (docs/autotuning.md).\n"
            f"STITCH_LAUNCH: dict[str, dict[str, int]] = {launch or {}!r}"
        )
    if names:
        parts.append(_runtime_source(names))
    if cuda_src:
        name = _extension_name(analysis.task, cuda_src, cpp_src)
        parts.append(f"CUDA_SRC = r'''{cuda_src}'''")
        parts.append(f"CPP_SRC = r'''{cpp_src}'''")
        cudnn = ", use_cudnn=True" if uses_cudnn else ""
        parts.append(
            f"_ext = _stitch_build({name!r}, CUDA_SRC, CPP_SRC, {arch_digits(options.arch)!r}, use_cublas={uses_gemm}{cudnn})"
        )
    model = _model_class(analysis, body, options.cuda_graph, matched_body)
    if analysis.source.prelude:
        parts.append("\n\n".join(_prelude_used(analysis, "\n".join(helpers) + model)))
    parts.extend(h.rstrip() for h in helpers)
    parts.append(model)
    return "\n\n\n".join(p.rstrip() for p in parts if p.strip()) + "\n"


def _model_class(
    analysis: Analysis, body: list[str], cuda_graph: bool, matched_body: list[str] | None = None
) -> str:
    source = analysis.source
    forward_text = "\n".join(body + (matched_body or []))
    members = [indent(m, 4) for m in _members_used(source.class_members, forward_text)]
    signature = source.forward_signature
    params = ", ".join(source.forward_params)
    forward_body = indent("\n".join(body), 8)
    if cuda_graph:
        args = f"({params},)" if len(source.forward_params) == 1 else f"({params})"
        forward = (
            f"    def forward({signature}):\n"
            '        runner = self.__dict__.setdefault("_stitch_graph", _StitchGraphRunner())\n'
            f"        return runner(self, self._stitch_forward, {args})\n\n"
            f"    def _stitch_forward({signature}):\n{forward_body}"
        )
    else:
        forward = f"    def forward({signature}):\n{forward_body}"
    if matched_body is not None:
        forward += f"\n\n    def _stitch_forward_tf32({signature}):\n{indent(chr(10).join(matched_body), 8)}"
    return "class ModelNew(nn.Module):\n" + "\n\n".join(members + [forward]) + "\n"


def _members_used(members: list[str], forward_text: str) -> list[str]:
    """Model's members without the helper methods the regenerated forward no longer calls (Mamba's
    `segsum`): their PyTorch code would sit in the program unused (and read as a fallback). A
    method stays when the forward or another kept member names it. Also used on the prelude's
    top-level statements (functions nobody names go)."""
    named: dict[int, str] = {}
    for i, member in enumerate(members):
        tree = ast.parse(member)
        node = tree.body[0] if len(tree.body) == 1 else None
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("__") and not node.decorator_list:
            named[i] = node.name
    kept = set(range(len(members))) - set(named)
    changed = True
    while changed:  # keep what the forward or a kept member names, until nothing more is needed
        changed = False
        text = forward_text + "\n".join(members[i] for i in kept)
        for i, name in named.items():
            if i not in kept and re.search(rf"\b{re.escape(name)}\b", text):
                kept.add(i)
                changed = True
    return [m for i, m in enumerate(members) if i in kept]


def _prelude_used(analysis: Analysis, program_text: str) -> list[str]:
    """The problem's top-level code, with the forward (and the helper methods only it called) taken
    out of the nn.Module classes the trace went through, and then the top-level functions nothing
    left names: the regenerated forward computes their work, so their PyTorch code would sit in the
    program unused. A class still called as one module by the graph (a leaf the tracer kept) keeps
    all of it."""
    traced = analysis.traced
    if traced is None:
        return list(analysis.source.prelude)
    called = {
        type(traced.root.get_submodule(str(n.target))).__name__
        for n in traced.graph.nodes
        if n.op == "call_module"
    }
    out = []
    for statement in analysis.source.prelude:
        tree = ast.parse(statement)
        node = tree.body[0] if len(tree.body) == 1 else None
        if not isinstance(node, ast.ClassDef) or node.name in called or not _is_module_class(node):
            out.append(statement)
            continue
        members = [
            ast.unparse(m) for m in node.body if not (isinstance(m, ast.FunctionDef) and m.name == "forward")
        ]
        kept = _members_used(members, "")
        node.body = [ast.parse(m).body[0] for m in kept] or [ast.Pass()]
        out.append(ast.unparse(node))
    return _members_used(out, program_text)


def _is_module_class(node: ast.ClassDef) -> bool:
    """A class deriving from nn.Module (spelled nn.Module, torch.nn.Module or Module)."""
    return any(ast.unparse(base).split(".")[-1] == "Module" for base in node.bases)


def _untraced_program(analysis: Analysis, options: Options, reason: str = "") -> Program:
    why = reason or f"the reference could not be traced: {analysis.trace_error}"
    extra = f"The forward is kept as PyTorch ({why})."
    lines = _header(analysis, extra)
    parts = ["\n".join(lines)]
    if analysis.source.prelude:
        parts.append("\n\n".join(analysis.source.prelude))
    members = [indent(m, 4) for m in analysis.source.class_members]
    members.append(indent(analysis.source.forward_source, 4))
    parts.append("class ModelNew(nn.Module):\n" + "\n\n".join(members) + "\n")
    source = "\n\n\n".join(p.rstrip() for p in parts) + "\n"
    return Program(
        source=source, templates={"g1": "pytorch"}, covered_ops=[], uncovered_ops=["forward"], options=options
    )
