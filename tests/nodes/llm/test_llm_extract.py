"""Code and JSON extraction from model answers: every answer shape we meet, and clear failures."""

from __future__ import annotations

import pytest

from graph.artifacts import Feedback
from graph.policy import PolicyOutputError
from nodes.llm.errors import CoderOutputError
from nodes.llm.extract import extract_program, strip_thinking
from nodes.llm.structured import parse_tolerantly

PROGRAM = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
"""


def test_fenced_program_and_its_summary_line() -> None:
    answer = f"Summary: a float4 ReLU kernel.\n\n```python\n{PROGRAM}```\n"
    program = extract_program(answer, "stop")
    assert program.source == PROGRAM
    assert program.summary == "a float4 ReLU kernel."
    assert program.form == "fenced"


def test_thinking_is_dropped_even_when_it_holds_code() -> None:
    decoy = "```python\nclass ModelNew:  # draft inside the reasoning\n    pass\n```"
    answer = f"<think>Let me draft.\n{decoy}\n</think>\nSummary: final.\n```python\n{PROGRAM}```"
    program = extract_program(answer)
    assert program.source == PROGRAM
    assert "draft" not in program.source


def test_closing_think_tag_without_opening_is_handled() -> None:
    visible, unterminated = strip_thinking("reasoning the server left in\n</think>\nanswer")
    assert visible.strip() == "answer" and not unterminated


def test_several_blocks_pick_the_one_defining_model_new() -> None:
    cuda = "```cuda\n__global__ void k(float* y) { y[0] = 1.f; }\n```"
    usage = "```bash\npython run.py\n```"
    answer = f"First the kernel:\n{cuda}\nThen the program:\n```python\n{PROGRAM}```\nRun it:\n{usage}"
    assert extract_program(answer).source == PROGRAM


def test_the_last_block_defining_model_new_wins() -> None:
    first = PROGRAM.replace("torch.relu(x)", "x.clamp(min=0)")
    answer = f"```python\n{first}```\nOn reflection, simpler:\n```python\n{PROGRAM}```"
    assert "torch.relu" in extract_program(answer).source


def test_bare_code_between_prose() -> None:
    answer = f"Here is the program you asked for.\n\n{PROGRAM}\nIt should be fast."
    program = extract_program(answer)
    assert program.form == "bare"
    assert program.source.startswith("import torch")
    assert "It should be fast" not in program.source
    assert program.summary == "Here is the program you asked for."


def test_unterminated_fence_is_a_clear_truncation_error() -> None:
    answer = f"Summary: x\n```python\n{PROGRAM[:120]}"
    with pytest.raises(CoderOutputError) as info:
        extract_program(answer, "length")
    message = str(info.value)
    assert "unterminated ```python block opened at line 2" in message
    assert "token limit" in message
    feedback = info.value.feedback()
    assert isinstance(feedback, Feedback) and feedback.kind == "parse_error"
    assert "token limit" in feedback.suggestions[0]
    assert PROGRAM[:40] in feedback.evidence


def test_fenced_source_that_does_not_parse_names_the_line() -> None:
    broken = PROGRAM.replace("return torch.relu(x)", "return torch.relu(x")
    with pytest.raises(CoderOutputError, match=r"does not parse: line 1\d"):
        extract_program(f"```python\n{broken}```")


def test_truncated_bare_code_fails_to_parse() -> None:
    with pytest.raises(CoderOutputError, match="unfenced program in the answer does not parse"):
        extract_program(PROGRAM[: PROGRAM.index("relu(") + 5])


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("", "the answer is empty"),
        ("I cannot help with CUDA today.", "no code defining class ModelNew"),
        ("```python\nprint('hi')\n```", "1 code block(s), none defining class ModelNew"),
        ("<think>long reasoning that never ends", "ended inside a <think> section"),
        ("```python\nModelNew = None\nclass Other: pass\n```", "none defining class ModelNew"),
    ],
)
def test_unusable_answers_raise_the_coder_error(answer: str, expected: str) -> None:
    with pytest.raises(CoderOutputError) as info:
        extract_program(answer)
    assert expected in str(info.value)
    assert isinstance(info.value, PolicyOutputError)  # the coder node's fix-branch contract


def test_tolerant_json_finds_the_object_in_prose_fences_and_thinking() -> None:
    text = (
        '<think>{"kind": "not this"}</think>Sure! Here it is:\n```json\n'
        '{"kind": "optimize", "summary": "fuse the bias into the GEMM"}\n```\nHope it helps.'
    )
    feedback = parse_tolerantly(Feedback, text)
    assert feedback.summary == "fuse the bias into the GEMM"


def test_tolerant_json_accepts_one_wrapping_level_and_rejects_mismatches() -> None:
    wrapped = '{"Feedback": {"kind": "optimize", "summary": "s"}}'
    assert parse_tolerantly(Feedback, wrapped).summary == "s"
    with pytest.raises(ValueError, match="does not match Feedback: kind"):
        parse_tolerantly(Feedback, '{"kind": "celebrate", "summary": "s"}')
    with pytest.raises(ValueError, match="no JSON object"):
        parse_tolerantly(Feedback, "nothing structured here")


def test_bare_code_cut_at_the_token_limit_is_refused_even_if_it_parses() -> None:
    cut = PROGRAM[: PROGRAM.index("    def forward")]  # parses: ModelNew without its forward
    with pytest.raises(CoderOutputError, match="token limit"):
        extract_program(cut, "length")
