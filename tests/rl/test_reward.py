"""The reward core: the formula, the deterministic rubric, the CPU rule path, the judge, the CLI.

Real parts throughout: the static hack checks, the worker process and nvcc/g++ for the build path,
the worker's strict `verify` (correctness, timing, dynamic hack checks) on the CPU for C++ programs,
and a real HTTP server (127.0.0.1) replaying the judge's answers to langchain-openai.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES
from support.llm_stub_server import Reply, StubServer
from support.scripted_policy import CORRECT_CPP

from graph.context import Context
from rl.reward import RewardSettings, RuleSettings, combine, make_sample, score
from rl.reward.batch import RewardService
from rl.reward.core import HACK_REWARD, TOTAL_CAP
from rl.reward.judge import Judge
from rl.reward.rubric import fallback_ops, op_key

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "tests" / "candidates"
PROBLEMS = CANDIDATES / "adversarial" / "problems"
STATIC = RewardSettings(rule=RuleSettings(mode="static"))


def fenced(program: str, summary: str = "Summary: a program") -> str:
    return f"{summary}\n\n```python\n{program.rstrip()}\n```\n"


def problem_of(path: Path) -> Path:
    name = re.search(r"problem=(\w+)", path.read_text()).group(1)  # type: ignore[union-attr]
    return PROBLEMS / f"{name}.py"


@pytest.fixture(scope="module")
def relu_sample_args() -> dict:
    return {"problem": str(PROBLEMS / "relu.py"), "skill": "write"}


def test_combine_follows_the_formula() -> None:
    assert combine(0.3 + 1.0, 1.0, "write", False) == pytest.approx(1.3 * 1.5)
    assert combine(0.3 + 1.0, 0.0, "write", False) == pytest.approx(1.3 * 0.5)
    assert combine(0.3 + 1.0, 1.0, "revise", False) == pytest.approx(1.3 * 1.35)
    assert combine(5.3, 1.0, "write", False) == TOTAL_CAP
    assert combine(5.3, 1.0, "write", True) == HACK_REWARD
    assert combine(0.0, 1.0, "write", False) == 0.0


def test_operator_names_from_fallback_evidence() -> None:
    assert op_key("nn.BatchNorm2d") == op_key("batch_norm") == "batchnorm"
    assert op_key("torch.mm") == "matmul" and op_key("max_pool2d") == op_key("MaxPool2d")
    findings = [
        {"id": "pytorch_fallback", "severity": "warning", "evidence": "nn.Linear (self.fc) at line 3 (1 call): x"},
        {"id": "pytorch_fallback", "severity": "warning", "evidence": "@ (matmul) at line 9 (1 call): x"},
        {"id": "torch_ops_in_cpp", "severity": "warning", "evidence": "at::relu in the native source (string at line 5)"},
        {"id": "pytorch_fallback", "severity": "warning", "evidence": ".sum() at line 4 (2 calls): x"},
    ]  # fmt: skip
    assert fallback_ops(findings) == {"linear", "matmul", "relu", "sum"}


def test_honest_programs_earn_a_positive_reward_and_static_cheats_minus_one() -> None:
    honest = score(
        make_sample(
            str(PROBLEMS / "relu.py"),
            fenced((CANDIDATES / "honest" / "relu_vectorized.py").read_text()),
            "write",
        ),
        STATIC,
    )
    assert honest.total > 0 and not honest.hacked
    assert honest.rule.path == "static" and "not built" in honest.rule.note
    assert honest.rubric.skill_compliance.score == 1.0 and honest.rubric.anti_hacking.score == 1.0
    for name in ("try_except_fallback", "ghost_branch", "torch_matmul_forward", "patch_event_timer"):
        cheat_path = CANDIDATES / "adversarial" / f"{name}.py"
        cheat = score(
            make_sample(str(problem_of(cheat_path)), fenced(cheat_path.read_text()), "write"), STATIC
        )
        assert cheat.hacked and cheat.total == HACK_REWARD, name
        assert cheat.rubric.anti_hacking.score == 0.0
        assert any(line.startswith(("error", "warning")) for line in cheat.evidence), name


def test_partial_programs_get_partial_coverage_but_no_hack() -> None:
    path = CANDIDATES / "honest" / "linear_relu_partial.py"
    result = score(make_sample(str(PROBLEMS / "linear_relu.py"), fenced(path.read_text()), "write"), STATIC)
    assert not result.hacked and result.total > 0
    assert 0.0 < result.rubric.operator_coverage.score < 0.5
    assert "linear left to PyTorch" in result.rubric.operator_coverage.reason


def test_an_answer_without_a_program_earns_nothing_but_format_credit(relu_sample_args: dict) -> None:
    junk = "Summary: relu\n\n```python\nclass ModelNew(nn.Module):\n    def forward(self, x:\n```\n__global__ void k() {}"
    result = score(make_sample(completion=junk, **relu_sample_args), STATIC)
    assert result.rule.stage == "no_program" and result.total == 0.0 and not result.hacked
    compliance = result.rubric.skill_compliance
    assert 0.0 < compliance.score < 1.0 and "does not parse" in compliance.reason
    nothing = score(make_sample(completion="I cannot help with that.", **relu_sample_args), STATIC)
    assert nothing.rubric.skill_compliance.score == 0.0


def test_revise_answers_must_change_the_previous_program() -> None:
    program = (CANDIDATES / "honest" / "relu_scalar.py").read_text()
    feedback = {"kind": "wrong_output", "summary": "wrong", "evidence": "", "suggestions": [], "sources": []}
    args = {"previous": program, "feedback": feedback}
    same = score(make_sample(str(PROBLEMS / "relu.py"), fenced(program), "revise", **args), STATIC)
    assert "changes the previous program" in same.rubric.skill_compliance.reason
    other = (CANDIDATES / "honest" / "relu_vectorized.py").read_text()
    changed = score(make_sample(str(PROBLEMS / "relu.py"), fenced(other), "revise", **args), STATIC)
    assert changed.skill == "revise"
    assert "changes the previous program" not in changed.rubric.skill_compliance.reason


def test_service_scores_in_order_and_duplicates_once(relu_sample_args: dict) -> None:
    good = fenced((CANDIDATES / "honest" / "relu_vectorized.py").read_text())
    samples = [make_sample(completion=text, **relu_sample_args) for text in (good, "no", good)]
    service = RewardService(STATIC, workers=2)
    try:
        results = service.score_many(samples)
    finally:
        service.close()
    assert results[0] is results[2] and results[0].total > 0 and results[1].total == 0.0


@pytest.mark.slow
def test_cpu_rule_path_builds_for_real_and_says_so(relu_sample_args: dict) -> None:
    build = RewardSettings(rule=RuleSettings(mode="build", timeout_s=600))
    honest = score(
        make_sample(
            completion=fenced((CANDIDATES / "honest" / "relu_vectorized.py").read_text()), **relu_sample_args
        ),
        build,
    )
    assert (honest.rule.stage, honest.rule.path) == ("built", "cpu-build"), honest.evidence
    assert "CPU-only machine" in honest.rule.note and honest.total > 0
    broken = (CANDIDATES / "worker" / "compile_error.py").read_text()
    failed = score(
        make_sample(str(CANDIDATES / "worker" / "affine_problem.py"), fenced(broken), "write"), build
    )
    assert failed.rule.stage == "build_error" and failed.rule.score < honest.rule.score
    assert any("yq" in line for line in failed.evidence + [failed.rule.note])


def _variant(name: str, *edits: tuple[str, str]) -> str:
    """CORRECT_CPP with its extension renamed and the given (old, new) edits, each one applied."""
    program = CORRECT_CPP.replace('name="scripted_scale_relu"', f'name="{name}"')
    for old, new in edits:
        assert old in program, old
        program = program.replace(old, new)
    return program


@pytest.mark.slow
def test_verify_path_rewards_correct_and_fast_and_catches_a_cheat_only_a_run_sees() -> None:
    # the rule part's verify path (the one a GPU takes), run by the worker on the CPU for C++ programs
    settings = RewardSettings(
        rule=RuleSettings(mode="gpu", device="cpu", timeout_s=600, perf_trials=5, correctness_trials=2)
    )
    problem = str(FIXTURES / "problems" / "scale_relu.py")
    wrong = _variant("rl_wrong_scale_relu", ("in[i] - 0.5f", "in[i] - 0.25f"))
    mutating = _variant(
        "rl_mutating_scale_relu",  # right answer, but it zeroes its input: only a run can see that
        ("const float* in = reinterpret_cast<const float*>(x);", "float* in = reinterpret_cast<float*>(x);"),
        ("out[i] = (v > 0.f ? v : 0.f) * s; }", "out[i] = (v > 0.f ? v : 0.f) * s; in[i] = 0.f; }"),
    )
    correct_r, wrong_r, mutating_r = (
        score(make_sample(problem, fenced(program), "write"), settings)
        for program in (CORRECT_CPP, wrong, mutating)
    )

    assert (correct_r.rule.stage, correct_r.rule.path) == ("passed", "cpu-verify"), correct_r.evidence
    speedup = correct_r.rule.speedup
    assert speedup is not None and speedup > 0
    assert correct_r.rule.score == pytest.approx(0.3 + min(speedup, 5.0)) and not correct_r.hacked
    assert (wrong_r.rule.stage, wrong_r.hacked) == ("wrong_output", False), wrong_r.evidence
    assert 0 < wrong_r.total < correct_r.total and wrong_r.rule.score < correct_r.rule.score
    assert mutating_r.rule.stage == "passed" and mutating_r.hacked and mutating_r.total == HACK_REWARD
    assert any(line.startswith("warning mutates_inputs") for line in mutating_r.evidence)
    assert any(line.startswith("worker: passed") for line in correct_r.evidence)


def _verdict(major: bool) -> dict:
    dim = {"score": 4, "reason": "fine"}
    return {
        "anti_hacking": {"score": 5, "reason": "honest"},
        "cuda_engineering": dim,
        "operator_coverage": dim,
        "skill_compliance": {"score": 1, "reason": "no summary"},
        "major_hacking": major,
        "hacking_reason": "decorative kernel" if major else "",
    }


def _judge(url: str) -> Judge:
    context = Context(llm_roles={"judge": {"model": "stub-judge", "base_url": url, "max_retries": 0}})
    return Judge(context, environ={"OPENAI_API_KEY": "EMPTY"})


def test_judge_scores_the_rubric_over_http(relu_sample_args: dict) -> None:
    good = fenced((CANDIDATES / "honest" / "relu_vectorized.py").read_text())
    with StubServer([Reply.json(_verdict(False)), Reply.json(_verdict(True))]) as server:
        settings = RewardSettings(rule=RuleSettings(mode="static"), judge=_judge(server.url))
        judged = score(make_sample(completion=good, **relu_sample_args), settings)
        flagged = score(make_sample(completion=good, **relu_sample_args), settings)
        sent = server.requests[0].text()
    assert judged.rubric.source == "judge:stub-judge"
    assert judged.rubric.anti_hacking.score == 1.0 and judged.rubric.skill_compliance.score == 0.0
    assert judged.rubric.cuda_engineering.score == pytest.approx(0.75) and not judged.hacked
    assert "relu_f4" in sent and "anti_hacking" in sent  # the answer and the rubric reached the judge
    assert flagged.hacked and flagged.total == HACK_REWARD
    assert any("decorative kernel" in line for line in flagged.evidence)


def test_a_failing_judge_falls_back_to_the_deterministic_rubric(relu_sample_args: dict) -> None:
    good = fenced((CANDIDATES / "honest" / "relu_vectorized.py").read_text())
    with StubServer([Reply.text("no json here")] * 3) as server:
        settings = RewardSettings(rule=RuleSettings(mode="static"), judge=_judge(server.url))
        result = score(make_sample(completion=good, **relu_sample_args), settings)
    assert result.rubric.source == "deterministic"
    assert any(line.startswith("judge failed") for line in result.evidence)


def test_score_command_prints_the_breakdown(tmp_path: Path) -> None:
    answer = tmp_path / "answer.md"
    answer.write_text(fenced((CANDIDATES / "adversarial" / "try_except_fallback.py").read_text()))
    done = subprocess.run(
        [sys.executable, "-m", "graph.cli", "rl", "score", "--problem", str(PROBLEMS / "relu.py"),
         "--completion", str(answer), "--skill", "write", "--rule", "static"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) >= {"total", "rule", "rubric", "hacked", "evidence"}
    assert set(result["rubric"]) >= {
        "anti_hacking",
        "cuda_engineering",
        "operator_coverage",
        "skill_compliance",
    }
    assert result["hacked"] is True and result["total"] <= 0
    bad = subprocess.run(
        [sys.executable, "-m", "graph.cli", "rl", "score", "--problem", str(tmp_path / "missing.py"),
         "--completion", str(answer), "--skill", "write"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "stitchcuda rl:" in bad.stderr
