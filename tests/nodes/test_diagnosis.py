"""nodes.diagnosis: rules over profiles -> ranked findings -> Feedback citing retrieved guidance.

Evidence comes from the profiler fixtures (tests/fixtures/profiles: real H200 captures where one exists,
hand-made for the few error cases; see the README there) and small Plans built here. Retrieval runs against the real
guidance store (Chroma, offline embedder) in the session's temporary store directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES

from graph.artifacts import Feedback, OpInfo, Plan, Profile, TensorSpec, TestResult
from graph.context import Context
from graph.policy import register_policy, unregister_policy
from nodes import diagnosis
from nodes.profiler import policy_advice, profile_from_system
from tools.profilers import ncu, nsys
from tools.roofline import KNOWN, Ceilings

PROFILES = FIXTURES / "profiles"
H200 = KNOWN["NVIDIA H200"]
MEASURED = Ceilings.from_dict({**H200.to_dict(), "source": "measured"})


def records(name: str) -> ncu.NcuResult:
    kernels = ncu.parse_records((PROFILES / "ncu" / name).read_text())
    return ncu.NcuResult("ok", target="candidate", kernels=kernels)


def system(name: str, target: str, iters: int, own: tuple[str, ...] = ()) -> dict[str, Any]:
    texts = {p.name[5:-4]: p.read_text() for p in (PROFILES / "nsys" / name).glob("*.csv")}
    return nsys.summary_from_reports(texts, target=target, iters=iters, own_kernels=list(own))


def plan(op: str, flops: int, nbytes: int) -> Plan:
    spec = TensorSpec(shape=[8192, 8192], dtype="float32")
    return Plan(
        task="t",
        ops=[OpInfo(node="n1", op=op, target=op, inputs=[spec], output=spec, flops=flops, bytes=nbytes)],
        total_flops=flops,
        total_bytes=nbytes,
    )


TRANSPOSE = plan("t", 134_217_728, 1_073_741_824)
HOST_SYNC = plan("mul", 2_097_152, 8_388_608)
RELU = plan("relu", 536_870_912, 4_294_967_296)
MATMUL = plan("matmul", 137_438_953_472, 201_326_592)


def bad_kernels() -> diagnosis.Diagnosis:
    evidence = diagnosis.Evidence(ncu=records("bad_kernels_candidate.raw.csv"), device="NVIDIA H200")
    return diagnosis.diagnose(evidence, plan=TRANSPOSE, ceilings=MEASURED)


def transpose_only() -> diagnosis.Diagnosis:
    """The naive transpose alone (the same real record): a program whose one kernel stores uncoalesced."""
    kernels = [
        k for k in records("bad_kernels_candidate.raw.csv").kernels if k.base_name == "transpose_naive"
    ]
    evidence = diagnosis.Evidence(
        ncu=ncu.NcuResult("ok", target="candidate", kernels=kernels), device="NVIDIA H200"
    )
    return diagnosis.diagnose(evidence, plan=TRANSPOSE, ceilings=MEASURED)


def host_sync() -> diagnosis.Diagnosis:
    evidence = diagnosis.Evidence(system=system("host_sync", "candidate", 5), device="NVIDIA H200")
    return diagnosis.diagnose(evidence, plan=HOST_SYNC, ceilings=MEASURED)


def rules(d: diagnosis.Diagnosis) -> list[str]:
    return [f.rule for f in d.findings]


def test_every_planted_kernel_bottleneck_is_found_and_the_worst_ranks_first() -> None:
    d = bad_kernels()
    # Five kernels each make a full pass over the matrix (and one spills): 16x the minimum traffic.
    assert d.top is not None and d.top.rule == "redundant-passes"
    found = {(f.rule, f.kernel) for f in d.findings}
    assert {
        ("uncoalesced-access", "transpose_naive"),
        ("bank-conflicts", "transpose_smem_conflicts"),
        ("warp-divergence", "divergent_scale"),
        ("low-occupancy-shared-memory", "smem_hog"),
        ("register-spills", "spill_scratch"),
    } <= found
    # The branch-free kernels read 0% branch uniformity; that is no divergence evidence.
    assert {k for r, k in found if r == "warp-divergence"} == {"divergent_scale"}
    uncoalesced = next(f for f in d.findings if f.rule == "uncoalesced-access")
    assert uncoalesced.evidence["global_store_bytes_used_per_sector_pct"] == 12.5
    impacts = [f.impact for f in d.findings]
    assert impacts == sorted(impacts, reverse=True) and all(0.0 <= i <= 1.0 for i in impacts)


def test_redundant_passes_compares_dram_bytes_with_the_plans_minimum() -> None:
    finding = next(f for f in bad_kernels().findings if f.rule == "redundant-passes")
    assert finding.evidence["minimum_bytes"] == 1_073_741_824
    moved = sum(k.dram_bytes or 0.0 for k in records("bad_kernels_candidate.raw.csv").kernels)
    assert finding.evidence["ratio"] == pytest.approx(moved / 1_073_741_824, abs=0.01) and moved > 1.6e10


def test_program_level_findings_for_syncs_copies_and_idle_gpu() -> None:
    d = host_sync()
    assert d.top is not None and d.top.rule == "host-sync"
    assert d.top.evidence["syncs_per_forward"] == 4.0 and d.top.evidence["dtoh_copies"] == 2.0
    assert {"launch-bound", "host-transfers"} <= set(rules(d))
    launch = next(f for f in d.findings if f.rule == "launch-bound")
    assert launch.evidence["kernels_per_forward"] == 26.0 and "CUDA graph" in launch.advice[0]


def test_a_kernel_at_the_bandwidth_roof_has_little_at_stake() -> None:
    evidence = diagnosis.Evidence(
        system=system("relu_both", "candidate", 5, ("stitch_ew_vec_kernel",)),
        ncu=records("relu_candidate.raw.csv"),
        device="NVIDIA H200",
    )
    d = diagnosis.diagnose(evidence, plan=RELU, ceilings=MEASURED)
    assert d.pct_of_sol == pytest.approx(100 * RELU.total_bytes / H200.copy_bandwidth * 1e3 / d.measured_ms)
    assert 90 < d.pct_of_sol < 100
    assert d.top is not None and d.top.rule == "memory-bound" and d.top.impact < 0.1
    assert not {"launch-bound", "uncoalesced-access", "host-sync", "redundant-passes"} & set(rules(d))
    assert "95% of SOL" in d.summary()


def test_fp32_gemm_off_the_tensor_cores_is_reported_with_the_precision_caveat() -> None:
    evidence = diagnosis.Evidence(ncu=records("matmul_reference.raw.csv"), device="NVIDIA H200")
    fp32 = diagnosis.diagnose(evidence, plan=MATMUL, ceilings=MEASURED, precision="fp32")
    finding = next(f for f in fp32.findings if f.rule == "no-tensor-cores")
    assert "fp32 tolerance" in finding.title and finding.evidence["fma_pipe_pct"] == pytest.approx(79.33)
    tf32 = diagnosis.diagnose(evidence, plan=MATMUL, ceilings=MEASURED, precision="tf32")
    allowed = next(f for f in tf32.findings if f.rule == "no-tensor-cores")
    assert "tf32 allows them" in allowed.title and allowed.impact > finding.impact


def test_no_tensor_core_finding_needs_a_gemm_heavy_compute_bound_problem() -> None:
    evidence = diagnosis.Evidence(ncu=records("matmul_reference.raw.csv"), device="NVIDIA H200")
    memory_bound = plan("matmul", 1_000, 10**9)
    assert "no-tensor-cores" not in rules(diagnosis.diagnose(evidence, plan=memory_bound, ceilings=MEASURED))


def test_cublas_cp_async_loads_reading_zero_bytes_per_sector_are_not_uncoalesced() -> None:
    # Real H200 record: cuBLAS SGEMM loads through cp.async; ncu's SASS byte count reads 0% there,
    # at 4 sectors per request (a perfectly coalesced fp32 warp access). 0% is no evidence.
    gemm = records("matmul_reference.raw.csv").kernels[0]
    assert gemm.global_load_bytes_per_sector_pct == 0 and gemm.global_load_sectors_per_request == 4
    evidence = diagnosis.Evidence(ncu=records("matmul_reference.raw.csv"), device="NVIDIA H200")
    found = diagnosis.diagnose(evidence, plan=MATMUL, ceilings=MEASURED, precision="fp32")
    assert "uncoalesced-access" not in rules(found) and found.top.rule == "no-tensor-cores"
    strided = diagnosis.diagnose(
        diagnosis.Evidence(
            ncu=_kernel(
                global_load_bytes_per_sector_pct=0.0, global_load_sectors=3.2e7, global_load_requests=1e6
            )
        )
    )
    assert "uncoalesced-access" in rules(strided)  # many sectors per request still count


def _kernel(**values: Any) -> ncu.NcuResult:
    base: dict[str, Any] = dict(
        id=0,
        name="void k<float>(float *)",
        base_name="k",
        duration_ns=500_000.0,
        sm_throughput_pct=20.0,
        memory_throughput_pct=30.0,
        theoretical_occupancy_pct=25.0,
        achieved_occupancy_pct=22.0,
        registers_per_thread=128.0,
        limit_registers=2.0,
        limit_shared_mem=16.0,
        limit_warps=8.0,
        limit_blocks=32.0,
    )
    base.update(values)
    return ncu.NcuResult("ok", kernels=[ncu.KernelMetrics(**base)])


def test_low_occupancy_from_registers_unless_the_kernel_is_compute_bound() -> None:
    d = diagnosis.diagnose(diagnosis.Evidence(ncu=_kernel(), device="GPU"))
    finding = next(f for f in d.findings if f.rule == "low-occupancy-registers")
    assert (
        finding.evidence["registers_per_thread"] == 128.0
        and "launch__registers_per_thread" in finding.metrics
    )
    busy = diagnosis.diagnose(diagnosis.Evidence(ncu=_kernel(sm_throughput_pct=85.0), device="GPU"))
    assert "low-occupancy-registers" not in rules(busy)


def test_small_grid_shows_in_the_latency_bound_finding() -> None:
    d = diagnosis.diagnose(
        diagnosis.Evidence(ncu=_kernel(waves_per_sm=0.25, theoretical_occupancy_pct=100.0), device="GPU")
    )
    finding = next(f for f in d.findings if f.rule == "latency-bound")
    assert finding.evidence["waves_per_sm"] == 0.25 and "fewer blocks than SMs" in finding.symptoms
    assert "0.25 waves" in finding.advice[0]


def test_launch_bound_from_the_worker_profile_and_the_timing_alone() -> None:
    profile = Profile(source="torch_profiler", device_ms=0.3, kernel_count=20, own_kernel_share=1.0)
    test = TestResult(status="passed", candidate_ms=1.0)
    d = diagnosis.diagnose(diagnosis.Evidence(profile=profile, device="NVIDIA H200"), test=test)
    assert d.top is not None and d.top.rule == "launch-bound"
    assert d.top.impact == pytest.approx(0.9 * 0.7)
    one_long_kernel = Profile(source="torch_profiler", device_ms=0.9, kernel_count=1, own_kernel_share=1.0)
    quiet = diagnosis.diagnose(diagnosis.Evidence(profile=one_long_kernel, device="NVIDIA H200"), test=test)
    assert "launch-bound" not in rules(quiet)


def test_a_cpu_run_says_there_is_no_gpu_evidence() -> None:
    profile = Profile(source="torch_profiler", device_ms=3.0, kernel_count=3, own_kernel_share=0.5)
    d = diagnosis.diagnose(diagnosis.Evidence(profile=profile, device="cpu"), plan=RELU, ceilings=H200)
    assert rules(d) == ["no-gpu-profile"]
    assert any("ceilings assumed" in note for note in d.notes)


def test_retrieval_queries_name_symptoms_and_metrics_never_kernels_or_code() -> None:
    for finding in bad_kernels().findings + host_sync().findings:
        query = finding.query()
        assert "Symptoms:" in query and "Metrics:" in query
        assert finding.kernel == "" or finding.kernel not in query
        assert not any(token in query for token in ("__global__", "void ", "{", ";\n"))


def test_feedback_cites_the_notes_retrieved_for_the_top_findings() -> None:
    d = transpose_only()
    guidance = diagnosis.retrieve_guidance(d)
    assert not guidance.error
    top_notes = guidance.cited[0]
    assert {"coalesced-global-loads", "uncoalesced-stores", "strided-and-aos-access"} & set(top_notes)
    feedback = diagnosis.feedback_from(d, guidance)
    assert feedback.kind == "optimize" and "\n" not in feedback.summary
    assert feedback.summary.startswith("uncoalesced global stores in transpose_naive")
    assert feedback.suggestions[0].endswith(f"[notes: {', '.join(top_notes)}]")
    assert feedback.sources == guidance.sources and set(top_notes) <= set(feedback.sources)
    assert "Speed of light: SOL" in feedback.evidence and "transpose_naive: 100%" in feedback.evidence
    assert len(guidance.notes) == len(guidance.sources) and guidance.notes[0].startswith(
        f"[{feedback.sources[0]}]"
    )


def test_host_sync_diagnosis_retrieves_the_synchronisation_notes() -> None:
    guidance = diagnosis.retrieve_guidance(host_sync())
    assert {"hidden-host-synchronisation", "avoid-host-device-round-trips"} & set(guidance.cited[0])


def test_a_broken_guidance_store_leaves_the_advice_uncited_but_whole() -> None:
    def broken(query: str, k: int) -> list[Any]:
        raise RuntimeError("chromadb is not installed")

    d = host_sync()
    guidance = diagnosis.retrieve_guidance(d, broken)
    feedback = diagnosis.feedback_from(d, guidance)
    assert feedback.sources == [] and "guidance store unavailable" in feedback.evidence
    assert feedback.suggestions and "[notes:" not in feedback.suggestions[0]


def test_merging_keeps_the_author_of_the_diagnosis_reading_in_front() -> None:
    diagnosed = Feedback(
        kind="optimize", summary="diag", evidence="E1", suggestions=["a [notes: n1]"], sources=["n1"]
    )
    advice = Feedback(
        kind="optimize", summary="llm", evidence="E2", suggestions=["b", "a [notes: n1]"], sources=["n2"]
    )
    llm_first = diagnosis.merge_advice(diagnosed, advice, policy_read_diagnosis=True)
    assert llm_first.summary == "llm" and llm_first.suggestions == ["b", "a [notes: n1]"]
    diag_first = diagnosis.merge_advice(diagnosed, advice, policy_read_diagnosis=False)
    assert diag_first.summary == "diag" and diag_first.suggestions == ["a [notes: n1]", "b"]
    assert diag_first.sources == ["n1", "n2"] and diag_first.evidence == "E1\nE2"
    assert diagnosis.merge_advice(diagnosed, None, policy_read_diagnosis=False) is diagnosed


class _Reader:
    name = "diag-reader"

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def advise(
        self,
        task: Any,
        plan: Any,
        candidate: Any,
        test: Any,
        profile: Any,
        *,
        diagnosis: str = "",
        notes: Any = (),
    ) -> Feedback:
        self.seen = {"diagnosis": diagnosis, "notes": list(notes)}
        return Feedback(kind="optimize", summary="read it")


class _Plain:
    name = "plain"

    def advise(self, task: Any, plan: Any, candidate: Any, test: Any, profile: Any) -> Feedback:
        return Feedback(kind="optimize", summary="plain advice")


@pytest.mark.parametrize("policy", [_Reader(), _Plain()], ids=["reads-diagnosis", "plain"])
def test_the_policy_gets_the_diagnosis_and_notes_only_when_it_takes_them(policy: Any) -> None:
    register_policy(policy.name, lambda context: policy)
    try:
        advice, read, why = policy_advice(
            Context(policy=policy.name), None, None, None, None, None, "D", ["[n] note"]
        )  # type: ignore[arg-type]
    finally:
        unregister_policy(policy.name)
    assert why == "" and advice is not None
    assert read is isinstance(policy, _Reader)
    if isinstance(policy, _Reader):
        assert policy.seen == {"diagnosis": "D", "notes": ["[n] note"]}


def test_profile_artifact_from_a_system_summary() -> None:
    profile = profile_from_system(system("host_sync", "candidate", 5))
    assert profile.source == "nsys" and profile.kernel_count == 26
    assert profile.top[0].calls == 24 and profile.device_ms == pytest.approx(0.9575)
    assert "GPU busy 18%" in profile.summary


def test_diagnosis_serialises_for_reports(tmp_path: Path) -> None:
    import json

    data = bad_kernels().to_dict()
    text = json.dumps(data)
    assert data["findings"][0]["rule"] == "redundant-passes"
    assert data["speed_of_light"]["bound"] == "memory" and data["speed_of_light"]["pct_of_sol"] is not None
    assert data["kernels"][0]["class"] == "memory-bound" and "transpose_naive" in text


def test_reports_are_written_from_a_captures_results(tmp_path: Path) -> None:
    import json

    from evals.device.write_reports import write_reports

    bad = ncu.NcuResult(
        "ok",
        target="candidate",
        device="NVIDIA H200",
        kernels=records("bad_kernels_candidate.raw.csv").kernels,
    )
    relu = ncu.NcuResult(
        "ok", target="candidate", device="NVIDIA H200", kernels=records("relu_candidate.raw.csv").kernels
    )
    texts = {p.name[5:-4]: p.read_text() for p in (PROFILES / "nsys" / "relu_both").glob("*.csv")}
    results = {
        "ceilings": MEASURED.to_dict(),
        "skipped": [],
        "entries": {
            "synthetic_bad_kernels": {
                "problem": "synthetic/bad_kernels",
                "plan": TRANSPOSE.dump(),
                "candidate": {"ncu": bad.to_dict()},
            },
            "level1_1_ReLU": {
                "problem": "level1/1_ReLU",
                "plan": RELU.dump(),
                "reference": {
                    "system": nsys.summary_from_reports(
                        texts, target="reference", iters=5, require_range=True
                    )
                },
                "candidate": {
                    "ncu": relu.to_dict(),
                    "system": nsys.summary_from_reports(
                        texts,
                        target="candidate",
                        iters=5,
                        own_kernels=["stitch_ew_vec_kernel"],
                        require_range=True,
                    ),
                },
            },
        },
    }
    written = write_reports(results, tmp_path)
    assert {p.name for p in written} == {
        "synthetic_bad_kernels.md",
        "synthetic_bad_kernels.json",
        "level1_1_ReLU.md",
        "level1_1_ReLU.json",
        "README.md",
    }
    report = (tmp_path / "synthetic_bad_kernels.md").read_text()
    assert "| `spill_scratch` | 1 | 39% |" in report and "uncoalesced global stores" in report
    assert "Sources: " in report and "[notes: " in report
    data = json.loads((tmp_path / "level1_1_ReLU.json").read_text())
    assert data["candidate"]["diagnosis"]["speed_of_light"]["pct_of_sol"] == pytest.approx(95.0, abs=0.1)
    assert data["reference"]["feedback"]["kind"] == "optimize"
    index = (tmp_path / "README.md").read_text()
    reference_ms = data["reference"]["diagnosis"]["speed_of_light"]["measured_ms"]
    ratio = f"{reference_ms / data['candidate']['diagnosis']['speed_of_light']['measured_ms']:.2f}x"
    assert (
        f"| [level1_1_ReLU](level1_1_ReLU.md) | candidate | 1.051 | {ratio} | 95.0 | 95 | 1 | memory-bound |"
        in index
    )
    assert ratio == "1.00x"  # the captured ReLU candidate matches eager (both at the DRAM roof)
    assert "| [level1_1_ReLU](level1_1_ReLU.md) | reference | 1.049 | - | " in index


def test_profile_node_on_the_cpu_gives_cited_feedback_and_writes_the_report(tmp_path: Path) -> None:
    """The real node: worker subprocess (CPU, no extension), diagnosis, retrieval, a plain policy."""
    import json

    from langgraph.runtime import Runtime

    from graph.artifacts import Candidate, Task
    from nodes.profiler import profiler

    problem = FIXTURES.parent / "candidates" / "worker" / "affine_problem.py"
    source = (FIXTURES.parent / "candidates" / "worker" / "torch_ok.py").read_text()
    spec = TensorSpec(shape=[64, 256], dtype="float32")
    task = Task(
        name="affine",
        path=str(problem),
        source=problem.read_text(),
        init_inputs=[2.0, 0.5],
        inputs=[spec],
        output=spec,
    )
    candidate = Candidate(id=3, source=source, mode="write", policy="plain")
    state: dict[str, Any] = {
        "task": task.dump(),
        "plan": plan("mul", 2 * 64 * 256, 2 * 4 * 64 * 256).dump(),
        "candidate": candidate.dump(),
        "test": TestResult(status="passed", candidate_ms=0.05).dump(),
    }
    register_policy("plain", lambda context: _Plain())
    try:
        context = Context(policy="plain", device="cpu", eval_timeout_s=300.0, out_dir=str(tmp_path))
        update = profiler(state, Runtime(context=context))  # type: ignore[arg-type]
    finally:
        unregister_policy("plain")
    feedback = Feedback.model_validate(update["feedback"])
    assert feedback.summary.startswith(
        "profiled without a GPU"
    )  # the diagnosis leads a plain policy's advice
    assert "plain advice" not in feedback.summary and feedback.sources
    assert update["coder_mode"] == "optimize" and update["profile"]["source"] == "torch_profiler"
    assert any(line.startswith("diagnosis: ") for line in update["log"])
    report = json.loads((tmp_path / "profiles" / "candidate-3.json").read_text())
    assert report["diagnosis"]["findings"][0]["rule"] == "no-gpu-profile" and report["ncu"] is None


def test_library_kernels_get_call_level_advice_and_no_advice_to_edit_their_code() -> None:
    # The real RecurrentLoop reference: small per-step cuBLAS GEMMs and torch's elementwise kernels.
    evidence = diagnosis.Evidence(ncu=records("recurrent_reference.raw.csv"), device="NVIDIA H200")
    d = diagnosis.diagnose(evidence, plan=plan("matmul", 12_900_000_000, 915_000_000), ceilings=MEASURED)
    code_level = {
        "low-occupancy-registers",
        "low-occupancy-shared-memory",
        "register-spills",
        "warp-divergence",
    }
    assert not code_level & set(rules(d))  # cuBLAS's register count is not ours to change
    latency = {f.kernel: f.advice[0] for f in d.findings if f.rule == "latency-bound"}
    assert "Kernel2" in latency and "strided-batched GEMM" in latency["Kernel2"]
    assert "fuse it with its neighbours" in latency["vectorized_elementwise_kernel"]
    assert not any("smaller blocks" in advice for advice in latency.values())


def test_library_kernel_names_are_told_from_ours() -> None:
    library = [
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(T1::Params)",
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
        "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>(int, T2, T3)",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>()",
        "ampere_sgemm_128x64_nn",
    ]
    ours = ["void stitch_ew_vec_kernel<StitchEw_74deecb5df>(T1, long)", "transpose_naive", "my_gemv_kernel"]
    assert all(diagnosis.is_library_kernel(name) for name in library)
    assert not any(diagnosis.is_library_kernel(name) for name in ours)
