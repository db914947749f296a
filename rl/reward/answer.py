"""What an answer holds, read without running it: the program and the facts the rubric checks.

The program is pulled out exactly as the LLM coder's answers are (`nodes.llm.extract`), so an answer
the graph would reject earns no rule reward. The facts (fences, ModelNew, signatures, kernels,
launches, native-source idioms) are read from the text even when the program does not parse, so a
model that gets part of the format right is told so: that partial credit is what makes skill
compliance learnable for a small model.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from nodes.llm.errors import CoderOutputError
from nodes.llm.extract import extract_program, fenced_blocks, strip_thinking
from tools.checks import kernel_names

_MODEL_NEW = re.compile(r"^class\s+ModelNew\s*\(\s*(?:torch\.)?(?:nn\.)?Module\s*\)\s*:", re.MULTILINE)
_GLOBAL = re.compile(r"__global__\s+(?:void|static\s+void)")
_LAUNCH = re.compile(r"<<<\s*([^<>]*?)\s*>>>")
_BUILDER = re.compile(r"\bload_inline\s*\(")
_CUDA_SOURCES = re.compile(r"\bcuda_sources\s*=")
_SUMMARY = re.compile(r"^\s*\**summary\**\s*:", re.IGNORECASE | re.MULTILINE)
_NATIVE_MARKERS = ("__global__", "#include", "PYBIND11_MODULE", 'extern "C"')


@dataclass
class Answer:
    """One completion, read: the program (or why there is none) and its structural facts."""

    text: str
    program: str | None
    error: str
    fenced_blocks: int  # closed ```python (or unlabelled) blocks
    summary_line: bool  # a line starting with "Summary:" before the first block
    form: str  # fenced, bare or none
    defines_model_new: bool
    kernels: list[str]
    launches: list[str]  # the <<<...>>> configurations
    builds_extension: bool
    native: str  # every native-looking string literal (or the raw text when it does not parse), joined
    signature_note: str = ""
    signatures_match: bool = False
    facts: dict[str, bool] = field(default_factory=dict)


def _native_strings(program: str) -> list[str]:
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return []
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and any(marker in node.value for marker in _NATIVE_MARKERS)
    ]


def _params(tree: ast.Module, cls: str, method: str) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    args = item.args
                    names = [a.arg for a in [*args.posonlyargs, *args.args]][1:]  # without self
                    if args.vararg:
                        names.append("*" + args.vararg.arg)
                    return names
            return []
    return None


def signatures(program: str, reference: str) -> tuple[bool, str]:
    """Whether ModelNew's __init__ and forward take as many arguments as the reference's Model."""
    try:
        mine, theirs = ast.parse(program), ast.parse(reference)
    except SyntaxError:
        return False, "the program does not parse"
    notes = []
    for method in ("__init__", "forward"):
        own, ref = _params(mine, "ModelNew", method), _params(theirs, "Model", method)
        if own is None or ref is None:
            return False, "no ModelNew (or no reference Model) class"
        if len(own) != len(ref) and not any(p.startswith("*") for p in own):
            notes.append(f"ModelNew.{method} takes {len(own)} argument(s), Model.{method} takes {len(ref)}")
    return not notes, "; ".join(notes) or "the constructor and forward take the reference's arguments"


def read_answer(text: str, reference_source: str) -> Answer:
    """Extract the program like the LLM coder's answers and read the facts the rubric needs."""
    visible, _ = strip_thinking(text or "")
    blocks = [b for b in fenced_blocks(visible) if b.closed and b.lang in ("python", "py", "")]
    try:
        extracted = extract_program(text)
        program, error, form = extracted.source, "", extracted.form
    except CoderOutputError as exc:
        program, error, form = None, exc.message, "none"
    body = program if program is not None else visible
    native = "\n".join(_native_strings(program)) if program is not None else visible
    kernels = kernel_names([native]) if "__global__" in native else []
    if not kernels and _GLOBAL.search(native):
        kernels = ["(unnamed)"]
    answer = Answer(
        text=text,
        program=program,
        error=error,
        fenced_blocks=len(blocks),
        summary_line=bool(_SUMMARY.search(visible.split("```", 1)[0])),
        form=form,
        defines_model_new=bool(_MODEL_NEW.search(body)),
        kernels=kernels,
        launches=_LAUNCH.findall(native),
        builds_extension=bool(_BUILDER.search(body)) and bool(_CUDA_SOURCES.search(body)),
        native=native,
    )
    if program is not None:
        answer.signatures_match, answer.signature_note = signatures(program, reference_source)
    else:
        answer.signature_note = "no program to compare"
    return answer
