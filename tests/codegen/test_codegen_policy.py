"""OfflinePolicy as graph.policy.Policy: write, fix, optimise, and advise from the one diagnosis."""

from __future__ import annotations

import re
from pathlib import Path

from codegen.advice import CUDA_GRAPH_ADVICE, EW_UNROLL_ADVICE, requested
from codegen.policy import OfflinePolicy, options_from_meta
from graph.artifacts import Candidate, Feedback, Finding, KernelStat, Plan, Profile, Task, TestResult
from graph.context import Context
from graph.launch_advice import launch_from, launch_suggestion, parse_launch
from graph.policy import get_policy
from nodes.support.tuning import current_table
from tools.roofline import KNOWN

FIXTURES = Path(__file__).parents[1] / "fixtures" / "problems"


def task_for(relative: str) -> Task:
    path = FIXTURES / relative
    return Task(name=path.stem, path=str(path), source=path.read_text())


def first_candidate(relative: str) -> tuple[OfflinePolicy, Task, Plan, Candidate]:
    policy = OfflinePolicy(Context(policy="offline"))
    task = task_for(relative)
    plan = policy.plan(task, None)
    return policy, task, plan, policy.write(task, plan, 1)


def cuda_line_of(candidate: Candidate, needle: str) -> int:
    """1-based line number in cuda.cu (= the CUDA_SRC literal) of the first line containing needle."""
    literal = candidate.source.split("CUDA_SRC = r'''", 1)[1].split("'''", 1)[0]
    return next(i for i, line in enumerate(literal.splitlines(), start=1) if needle in line)


def test_registry_builds_the_offline_policy() -> None:
    policy = get_policy(Context(policy="offline"))
    assert isinstance(policy, OfflinePolicy) and policy.name == "offline"


def test_write_records_templates_and_coverage() -> None:
    _, _, plan, candidate = first_candidate("level2/4_Conv_BN_ReLU.py")
    assert candidate.policy == "offline" and candidate.mode == "write" and candidate.parent is None
    assert candidate.meta["templates"] == {"g1": "cudnn_conv", "g2": "bn_stats+ew_epilogue"}
    assert candidate.covered_ops == ["batch_norm", "conv2d", "relu"] and candidate.uncovered_ops == []
    assert "2/2 groups" in candidate.summary
    assert options_from_meta(candidate.meta).levels == {}


def test_build_error_demotes_the_group_that_owns_the_line() -> None:
    policy, task, plan, candidate = first_candidate("level2/3_Matmul_Scale_Softmax.py")
    line = cuda_line_of(candidate, "struct StitchPro_")  # inside group g2's code (softmax)
    feedback = Feedback(
        kind="build_error",
        summary="nvcc failed",
        evidence=f'/tmp/build/cuda.cu({line + 2}): error: identifier "x" is undefined',
    )
    fixed = policy.revise(task, plan, candidate, feedback, "fix", 2)
    assert fixed.parent == 1 and fixed.mode == "fix"
    assert options_from_meta(fixed.meta).levels == {"g2": 2}  # a bare softmax has no split form
    assert fixed.meta["demotions"][0]["group"] == "g2" and "g2" in fixed.summary
    assert fixed.meta["templates"] == {"g1": candidate.meta["templates"]["g1"], "g2": "pytorch"}
    assert "torch.softmax(mul, dim=-1)  # g2: PyTorch" in fixed.source


def test_cached_builder_line_labels_and_binding_errors_are_located() -> None:
    policy, task, plan, candidate = first_candidate("level2/3_Matmul_Scale_Softmax.py")
    line = cuda_line_of(candidate, "return stitch_softmax_run<")
    evidence = f"cuda_sources({line}): error: no instance of function template matches"
    fixed = policy.revise(
        task, plan, candidate, Feedback(kind="build_error", summary="x", evidence=evidence), "fix", 2
    )
    assert [d["group"] for d in fixed.meta["demotions"]] == ["g2"]
    cpp = candidate.source.split("CPP_SRC = r'''", 1)[1].split("'''", 1)[0]
    cpp_line = next(
        i for i, text in enumerate(cpp.splitlines(), 1) if "static void py_" in text and "gemm" in text
    )
    evidence = f"cpp_sources:{cpp_line}:3: error: expected ';'"
    fixed = policy.revise(
        task, plan, candidate, Feedback(kind="build_error", summary="x", evidence=evidence), "fix", 2
    )
    assert [d["group"] for d in fixed.meta["demotions"]] == ["g1"]


def test_runtime_error_from_the_binding_names_the_group() -> None:
    policy, task, plan, candidate = first_candidate("level2/2_Linear_GELU_Scale.py")
    feedback = Feedback(
        kind="runtime_error",
        summary="RuntimeError: stitch group g1 (gemm) failed: cuBLAS status 15",
    )
    fixed = policy.revise(task, plan, candidate, feedback, "fix", 2)
    assert fixed.meta["templates"]["g1"] == "cublaslt+ew_epilogue"  # fused epilogue -> separate kernel
    again = policy.revise(task, plan, fixed, feedback, "fix", 3)
    assert again.meta["templates"] == {"g1": "pytorch"}
    assert "# g1: PyTorch" in again.source and "CUDA_SRC" not in again.source
    assert len(again.meta["demotions"]) == 2


def test_unlocated_wrong_output_turns_off_the_graph_then_demotes_the_most_complex_group() -> None:
    policy, task, plan, candidate = first_candidate("level3/4_Attention_Block.py")
    assert plan.host.cuda_graph and candidate.meta["options"]["cuda_graph"]
    wrong = Feedback(kind="wrong_output", summary="max abs error 3e-2 at [0, 5, 7]")
    first = policy.revise(task, plan, candidate, wrong, "fix", 2)
    assert not first.meta["options"]["cuda_graph"] and first.meta["options"]["levels"] == {}
    second = policy.revise(task, plan, first, wrong, "fix", 3)
    (demotion,) = second.meta["demotions"]
    assert demotion["kind"] == "gemm" and demotion["to"] == "split"


def test_elementwise_split_gives_one_kernel_per_op() -> None:
    policy, task, plan, candidate = first_candidate("level2/6_Elementwise_Chain.py")
    feedback = Feedback(kind="wrong_output", summary="mismatch")
    fixed = policy.revise(task, plan, candidate, feedback, "fix", 2)
    assert sorted(fixed.meta["templates"]) == ["g1.1", "g1.2", "g1.3", "g1.4"]
    assert len(re.findall(r"^struct StitchEw_", fixed.source, re.MULTILINE)) == 4


SORT_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values


def get_inputs():
    return [torch.rand(8, 16)]


def get_init_inputs():
    return []
"""


def test_fix_of_an_all_pytorch_program_says_so() -> None:
    policy = OfflinePolicy(Context(policy="offline"))
    task = Task(name="sort", path="sort.py", source=SORT_PROBLEM)
    plan = policy.plan(task, None)
    candidate = policy.write(task, plan, 1)
    assert plan.uncovered_ops and not plan.covered_ops, "no template covers a sort"
    fixed = policy.revise(task, plan, candidate, Feedback(kind="wrong_output", summary="?"), "fix", 2)
    assert fixed.source == candidate.source and fixed.summary.startswith("no further fix")


def test_optimize_applies_a_cuda_graph_when_launch_bound() -> None:
    policy, task, plan, candidate = first_candidate("level2/4_Conv_BN_ReLU.py")
    assert not candidate.meta["options"]["cuda_graph"]
    advice = Feedback(
        kind="optimize", summary="launch-bound", suggestions=["[cuda_graph] capture the forward"]
    )
    faster = policy.revise(task, plan, candidate, advice, "optimize", 2)
    assert faster.meta["options"]["cuda_graph"] and faster.meta["optimizations"] == ["cuda_graph"]
    assert "_StitchGraphRunner" in faster.source


def test_optimize_unrolls_a_dominant_elementwise_kernel_then_stops() -> None:
    policy, task, plan, candidate = first_candidate("level1/1_ReLU.py")
    advice = Feedback(
        kind="optimize", summary="dominant kernel", suggestions=["[ew_unroll] more bytes in flight"]
    )
    faster = policy.revise(task, plan, candidate, advice, "optimize", 2)
    assert faster.meta["options"]["ew_unroll"] == 2 and "ew_unroll" in faster.meta["optimizations"]
    assert "launch['unroll'], launch['threads'], _stitch_stream(o0))" in faster.source
    assert current_table(faster.source) == {"g1": {"unroll": 2, "threads": 256}}
    done = policy.revise(task, plan, faster, advice, "optimize", 3)
    assert done.summary == "no further optimisation" and done.source == faster.source


def test_optimize_writes_a_tuned_launch_table_first_then_goes_on() -> None:
    policy, task, plan, candidate = first_candidate("level2/4_Conv_BN_ReLU.py")
    table = current_table(candidate.source)
    group = next(iter(table))
    assert table[group] == {"stats.threads": 0, "unroll": 1, "threads": 256}  # batch norm, then its ReLU
    tuned = {group: {"threads": 512}, "g999": {"threads": 128}}  # a group this program lacks is ignored
    advice = Feedback(
        kind="optimize",
        summary="launch-bound",
        suggestions=[launch_suggestion(tuned, 1.04), "[cuda_graph] capture the forward"],
    )
    assert launch_from(advice) == tuned
    faster = policy.revise(task, plan, candidate, advice, "optimize", 2)
    assert faster.meta["optimizations"] == ["launch"] and not faster.meta["options"]["cuda_graph"]
    assert current_table(faster.source)[group] == {"stats.threads": 0, "unroll": 1, "threads": 512}
    assert "g999" not in current_table(faster.source)
    assert options_from_meta(faster.meta).launch == {group: {"threads": 512}, "g999": {"threads": 128}}  # type: ignore[union-attr]
    # the same advice again: the table is already written, so the next optimisation comes
    graphed = policy.revise(task, plan, faster, advice, "optimize", 3)
    assert graphed.meta["optimizations"] == ["launch", "cuda_graph"]
    assert current_table(graphed.source)[group]["threads"] == 512 and "_StitchGraphRunner" in graphed.source


def test_a_malformed_launch_suggestion_is_no_table() -> None:
    broken = Feedback(kind="optimize", summary="x", suggestions=["[launch] {not json", "[launch] [1, 2]"])
    assert launch_from(broken) == {}
    assert parse_launch({"g1": {"threads": "512", "unroll": True}, "g2": 3}) == {}


def test_foreign_candidates_are_replaced_by_the_offline_program() -> None:
    policy, task, plan, _ = first_candidate("level1/1_ReLU.py")
    foreign = Candidate(id=4, source="broken", mode="write", policy="llm")
    fixed = policy.revise(task, plan, foreign, Feedback(kind="build_error", summary="x"), "fix", 5)
    assert (
        fixed.parent == 4 and "ModelNew" in fixed.source and "replaced a foreign candidate" in fixed.summary
    )


def _profile(kernels: int, device_ms: float, top: str, share: float, own: float) -> Profile:
    stat = KernelStat(name=top, calls=1, total_ms=device_ms * share, share=share)
    return Profile(
        source="torch_profiler", device_ms=device_ms, kernel_count=kernels, own_kernel_share=own, top=[stat]
    )


def _diagnosis(plan: Plan, test: TestResult, profile: Profile) -> list[Finding]:
    """The profile node's one diagnosis of this profile on the H200 (what `advise` is handed)."""
    from nodes import diagnosis

    evidence = diagnosis.Evidence(profile=profile, device="NVIDIA H200")
    return diagnosis.diagnose(evidence, plan=plan, test=test, ceilings=KNOWN["NVIDIA H200"]).findings


def test_advise_maps_a_launch_bound_diagnosis_to_a_cuda_graph() -> None:
    policy, task, plan, candidate = first_candidate("level3/1_MLP.py")
    test = TestResult(status="passed", candidate_ms=0.09, eager_ms=0.1)
    profile = _profile(12, 0.03, "sm90_xmma_gemm", 0.4, 0.9)
    findings = _diagnosis(plan, test, profile)
    assert findings[0].rule == "launch-bound"
    feedback = policy.advise(task, plan, candidate, test, profile, findings=findings)
    assert feedback.kind == "optimize" and feedback.suggestions == [CUDA_GRAPH_ADVICE]  # top kernel: cuBLAS
    assert "launch-bound" in feedback.summary and "-> cuda_graph" in feedback.evidence
    faster = policy.revise(task, plan, candidate, feedback, "optimize", 2)
    assert faster.meta["optimizations"] == ["cuda_graph"] and faster.meta["options"]["cuda_graph"]


def test_advise_unrolls_our_elementwise_kernel_below_speed_of_light() -> None:
    policy, task, plan, candidate = first_candidate("level1/1_ReLU.py")
    sol_ms = plan.total_bytes / 4.3e12 * 1e3
    test = TestResult(status="passed", candidate_ms=4 * sol_ms)
    profile = _profile(1, 4 * sol_ms, "void stitch_ew_vec_kernel<StitchEw_abc>(...)", 1.0, 1.0)
    findings = _diagnosis(plan, test, profile)
    assert [f.rule for f in findings] == ["sol-gap"] and "25% of speed of light" in findings[0].title
    feedback = policy.advise(task, plan, candidate, test, profile, findings=findings)
    assert feedback.suggestions == [EW_UNROLL_ADVICE] and "sol-gap" in feedback.summary
    # the same diagnosis with a library kernel on top asks for nothing the offline coder has
    library_top = _profile(1, 4 * sol_ms, "void at::vectorized_elementwise_kernel<4>(...)", 1.0, 0.0)
    assert policy.advise(task, plan, candidate, test, library_top, findings=findings).suggestions == []


def test_kernel_findings_name_the_kernel_the_remedy_needs() -> None:
    policy, task, plan, candidate = first_candidate("level1/1_ReLU.py")
    test = TestResult(status="passed", candidate_ms=1.0)
    profile = _profile(1, 1.0, "sm90_xmma_gemm", 1.0, 0.0)  # the profile's top is not ours
    ours = Finding(rule="latency-bound", title="t", impact=0.3, kernel="stitch_ew_vec_kernel")
    theirs = Finding(rule="latency-bound", title="t", impact=0.3, kernel="gemm_tiled")
    assert policy.advise(task, plan, candidate, test, profile, findings=[ours]).suggestions == [
        EW_UNROLL_ADVICE
    ]
    assert policy.advise(task, plan, candidate, test, profile, findings=[theirs]).suggestions == []
    nothing = policy.advise(task, plan, candidate, test, profile)
    assert nothing.suggestions == [] and "nothing" in nothing.summary


def test_a_busy_gpu_is_not_launch_bound_so_the_default_decides() -> None:
    policy, task, plan, candidate = first_candidate("level2/4_Conv_BN_ReLU.py")
    test = TestResult(status="passed", candidate_ms=1.0)
    profile = _profile(8, 0.98, "sm80_xmma_fprop_implicit_gemm", 0.8, 0.2)  # 98% busy
    findings = _diagnosis(plan, test, profile)
    assert "launch-bound" not in {f.rule for f in findings}
    advice = policy.advise(task, plan, candidate, test, profile, findings=findings)
    assert advice.suggestions == [] and requested(advice) == []


def test_the_launch_table_lists_the_groups_that_write_most_first() -> None:
    """The tuner goes through STITCH_LAUNCH in order: a short budget is spent on the biggest groups."""
    from codegen.emit.assemble import Options, assemble
    from codegen.schedule.plan import analyse

    path = Path(__file__).parents[2] / "evals" / "suite" / "level3" / "8_DenseBlock.py"
    analysis = analyse(Task(name=path.stem, path=str(path), source=path.read_text()))
    table = current_table(assemble(analysis, Options()).source)
    assert analysis.classifier is not None
    written = {
        g.id: sum(analysis.classifier.value(n).numel() for n in g.outputs)
        for g in analysis.groups
        if g.id in table
    }
    sizes = [written[g] for g in table]
    assert len(sizes) >= 13 and sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]
