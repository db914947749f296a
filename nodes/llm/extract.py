"""Pulling the program out of a coder model's answer.

Models wrap code in many ways: one fenced block, bare code after a sentence, several blocks (a CUDA
snippet, then the whole program), `<think>` sections before the answer, and answers cut off at the
token limit. `extract_program` accepts the first four and turns everything else into a
`CoderOutputError` whose message says what was wrong, so the fix branch can tell the model.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from nodes.llm.errors import CoderOutputError, one_line

_THINK_BLOCK = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(think|thinking)>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(think|thinking)>", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+#.-]*)[^`]*$")
_DEFINES_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.MULTILINE)
_CODE_START = re.compile(
    r"^(import\s|from\s+\S+\s+import\s|#|\"\"\"|'''|class\s|def\s|@|[A-Za-z_][A-Za-z0-9_]*\s*(:[^=]+)?=[^=])"
)
_MAX_START_TRIES = 5


@dataclass(frozen=True)
class FencedBlock:
    """One fenced code block of an answer."""

    lang: str
    code: str
    closed: bool
    first_line: int  # 1-based line of the opening fence in the visible answer


@dataclass(frozen=True)
class ExtractedProgram:
    """The program found in an answer, with the prose line that summarises it."""

    source: str
    summary: str
    form: str  # "fenced" or "bare": how the program was written
    repairs: tuple[str, ...] = ()  # what was done to the answer to get the program (none: as written)


def strip_thinking(text: str) -> tuple[str, bool]:
    """The answer without reasoning sections; True when it ends inside an unclosed `<think>`."""
    visible = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(visible))
    if closes:  # a server's reasoning parser may drop the opening tag but keep the closing one
        visible = visible[closes[-1].end() :]
    opening = _THINK_OPEN.search(visible)
    if opening:
        return visible[: opening.start()], True
    return visible, False


def fenced_blocks(text: str) -> list[FencedBlock]:
    """All fenced blocks in order; an opening fence never closed yields a block with closed=False."""
    blocks: list[FencedBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match.group("fence")
        start = i
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            stripped = lines[i].strip()
            if (
                stripped
                and stripped[0] == fence[0]
                and set(stripped) == {fence[0]}
                and len(stripped) >= len(fence)
            ):
                closed = True
                i += 1
                break
            body.append(lines[i])
            i += 1
        blocks.append(
            FencedBlock(match.group("lang").lower(), "\n".join(body).strip("\n") + "\n", closed, start + 1)
        )
    return blocks


def _defines_model_new(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body)


def _check_program(source: str, where: str, raw: str, finish_reason: str | None) -> str:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        cut = " (the answer hit the token limit)" if finish_reason == "length" else ""
        raise CoderOutputError(
            f"the program in {where} does not parse: line {exc.lineno}: {exc.msg}{cut}",
            raw=raw,
            finish_reason=finish_reason,
        ) from None
    if not _defines_model_new(tree):
        raise CoderOutputError(
            f"the program in {where} does not define class ModelNew at module level",
            raw=raw,
            finish_reason=finish_reason,
        )
    return source


def _summary(prose: str) -> str:
    for line in prose.splitlines():
        text = line.strip().lstrip("#*->").strip()
        text = re.sub(r"^\*{0,2}summary\*{0,2}\s*:\s*", "", text, flags=re.IGNORECASE).strip("* ")
        if text:
            return one_line(text, 200)
    return ""


def _is_trailing_prose(line: str) -> bool:
    """A blank line or an unindented sentence after the program: safe to drop. Code never is, so a
    program cut off mid-statement stays cut off (and fails to parse) instead of being trimmed."""
    if not line.strip():
        return True
    if line[0].isspace() or _CODE_START.match(line):
        return False
    return not line.rstrip().endswith((":", ")", "]", "}", ",", "\\", "(", "[", "{"))


def _bare_program(visible: str, raw: str, finish_reason: str | None) -> ExtractedProgram:
    """Code written without fences: the span from the first code line to the end, less prose after."""
    if finish_reason == "length":
        raise CoderOutputError(
            "the answer hit the token limit, so its unfenced program is cut off",
            raw=raw,
            finish_reason=finish_reason,
        )
    lines = visible.splitlines()
    model_line = next(i for i, line in enumerate(lines) if _DEFINES_MODEL_NEW.match(line))
    end = len(lines)
    while end > model_line + 1 and _is_trailing_prose(lines[end - 1]):
        end -= 1
    starts = [i for i in range(model_line + 1) if _CODE_START.match(lines[i])]
    first_error: SyntaxError | None = None
    for start in starts[:_MAX_START_TRIES]:
        source = "\n".join(lines[start:end]).rstrip() + "\n"
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            first_error = first_error or exc
            continue
        if _defines_model_new(tree):
            summary = _summary("\n".join(lines[:start]))
            return ExtractedProgram(source, summary, "bare", ("read a program written without a code fence",))
    detail = f": line {first_error.lineno}: {first_error.msg}" if first_error else ""
    raise CoderOutputError(
        f"the unfenced program in the answer does not parse{detail}", raw=raw, finish_reason=finish_reason
    )


def extract_program(answer: str, finish_reason: str | None = None) -> ExtractedProgram:
    """The complete program defining ModelNew in `answer`, or `CoderOutputError` saying why not."""
    if not answer or not answer.strip():
        raise CoderOutputError("the answer is empty", raw=answer or "", finish_reason=finish_reason)
    visible, open_think = strip_thinking(answer)
    if open_think and "ModelNew" not in visible:
        raise CoderOutputError(
            "the answer ended inside a <think> section and holds no program (raise max_tokens or think less)",
            raw=answer,
            finish_reason=finish_reason,
        )
    blocks = fenced_blocks(visible)
    unclosed = [b for b in blocks if not b.closed]
    if unclosed:
        block = unclosed[0]
        cut = "; the answer hit the token limit" if finish_reason == "length" else ""
        raise CoderOutputError(
            f"the answer ends inside an unterminated ```{block.lang} block opened at line {block.first_line} "
            f"(truncated answer{cut})",
            raw=answer,
            finish_reason=finish_reason,
        )
    candidates = [b for b in blocks if _DEFINES_MODEL_NEW.search(b.code)]
    if candidates:
        error: CoderOutputError | None = None
        for block in reversed(candidates):  # the last full version is the model's final word
            try:
                source = _check_program(
                    block.code, f"the block at line {block.first_line}", answer, finish_reason
                )
            except CoderOutputError as exc:
                error = error or exc
                continue
            prose_before_code = "\n".join(visible.splitlines()[: blocks[0].first_line - 1])
            repairs = ["dropped a <think> section"] if visible != answer else []
            if len(blocks) > 1:
                repairs.append(f"took the block at line {block.first_line} of {len(blocks)} code blocks")
            return ExtractedProgram(source, _summary(prose_before_code), "fenced", tuple(repairs))
        assert error is not None
        raise error
    if _DEFINES_MODEL_NEW.search(visible):  # ModelNew outside any fence: bare code
        program = _bare_program(visible, answer, finish_reason)
        if visible != answer:
            return ExtractedProgram(
                program.source, program.summary, program.form, ("dropped a <think> section", *program.repairs)
            )
        return program
    what = f"{len(blocks)} code block(s), none defining" if blocks else "no code defining"
    raise CoderOutputError(
        f"the answer has {what} class ModelNew (expected one ```python block with the whole program)",
        raw=answer,
        finish_reason=finish_reason,
    )
