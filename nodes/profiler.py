"""Profile node: profile the passing candidate, diagnose it, and turn the evidence into cited advice.

What runs, in order:
1. the worker's `profile` action (torch profiler; always: it is the fallback and says whether a GPU
   ran the candidate);
2. on a GPU, unless STITCHCUDA_PROFILERS=torch: the system profile (`tools.profilers.system_profile`: Nsight
   Systems when present, else the PyTorch profiler's timeline) and Nsight Compute per kernel
   (`tools.profilers.ncu`), each in its own process and each allowed to fail with a reason; the reference is
   profiled once per run the same way and kept as `reference_profile` (all gathered by
   `nodes.support.evidence`);
3. speed of light from the plan's FLOPs and bytes and the device's ceilings (`tools.roofline`);
4. the diagnosis (`nodes.diagnosis`): ranked findings, guidance retrieved with the diagnosis text,
   a Feedback whose suggestions cite the notes;
5. the policy's own advice (`advise`), given the diagnosis (its text, or its findings as data) and the
   notes when it accepts them, merged into the Feedback that reaches the coder;
6. on a GPU, when the candidate has launch knobs, the launch tuning (`nodes.support.tuning`, cached,
   within the run's budget): a faster table reaches the coder as a `[launch]` suggestion.
With `Context.out_dir` set, the whole evidence is also written to out_dir/profiles/candidate-N.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from langgraph.runtime import Runtime

from graph.artifacts import Candidate, Feedback, Plan, Profile, Task, TestResult
from graph.context import Context
from graph.launch_advice import launch_suggestion
from graph.policy import PolicyUnavailableError, accepts_keyword, get_policy
from graph.state import State, read
from nodes import diagnosis
from nodes.support.budget import charged
from nodes.support.evidence import Evidence, gather_gpu_evidence, profile_from_system, profilers_mode
from nodes.support.tuning import tune_launch
from nodes.support.worker_client import eval_request, run_worker, to_profile
from tools.protocol import EvalResponse


def precision_of(task: Task) -> str:
    """The precision the problem is held to: the harness pins TF32 off, so fp32 data means plain fp32."""
    from tools.roofline import precision_mode

    dtype = next((spec.dtype for spec in task.inputs if spec is not None), "float32")
    return precision_mode(dtype, allow_tf32=False)


def policy_advice(
    context: Context,
    task: Task,
    plan: Plan,
    candidate: Candidate,
    test: TestResult,
    profile: Profile,
    diagnosed: diagnosis.Diagnosis,
    notes: list[str],
) -> tuple[Feedback | None, bool, str]:
    """(advice, whether the policy wrote it from the diagnosis's text, a log line when it gave none).

    A policy gets what its `advise` takes: the diagnosis's text (`diagnosis`, the LLM verifier), its
    findings as data (`findings`, the offline policy maps them to its optimisations), the notes.
    """
    policy = get_policy(context)
    kwargs: dict[str, Any] = {}
    if accepts_keyword(policy.advise, "diagnosis"):
        kwargs["diagnosis"] = diagnosed.text()
    if accepts_keyword(policy.advise, "findings"):
        kwargs["findings"] = list(diagnosed.findings)
    if accepts_keyword(policy.advise, "notes"):
        kwargs["notes"] = notes
    try:
        return policy.advise(task, plan, candidate, test, profile, **kwargs), "diagnosis" in kwargs, ""
    except PolicyUnavailableError as exc:
        return None, False, f"no policy advice: the verifier is unavailable ({exc})"


def _ceilings(device: str, on_gpu: bool) -> Any:
    from tools.roofline import device_ceilings

    return device_ceilings(device if on_gpu else None, measure=on_gpu)


def write_report(out_dir: str, candidate: Candidate, report: dict[str, Any]) -> Path:
    path = Path(out_dir) / "profiles" / f"candidate-{candidate.id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str))
    return path


def verified_profile(test: TestResult) -> EvalResponse | None:
    """The profile the verification took of this candidate, as a profile response, if it took one.

    The verifier's hack checks already trace the candidate with the torch profiler on the GPU; that
    trace's summary answers this node, which then starts no worker (a process, a build-cache load and
    seconds under the GPU's lock per iteration).
    """
    if test.status != "passed" or not test.profile or "device_ms" not in test.profile:
        return None
    return cast(EvalResponse, {"status": "passed", "profile": test.profile, "device": test.device})


@charged
def profiler(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Profile the candidate, diagnose it, retrieve guidance and give the coder one cited Feedback."""
    context = runtime.context
    task = read(state, "task", Task)
    plan = read(state, "plan", Plan)
    candidate = read(state, "candidate", Candidate)
    test = read(state, "test", TestResult)
    response = verified_profile(test) or run_worker(
        eval_request(task, candidate.source, context, "profile", state.get("plan")), context
    )
    if response.get("status") != "passed" or "profile" not in response:
        reason = response.get("message") or response.get("status", "unknown")
        feedback = Feedback(kind="optimize", summary=f"no profile available ({reason})")
        return {
            "profile": None,
            "feedback": feedback.dump(),
            "coder_mode": "optimize",
            "log": [f"profiler: no profile for candidate {candidate.id}: {reason}"],
        }
    profile = to_profile(response["profile"])
    device = str(response.get("device", "") or "")
    evidence = Evidence(profile=profile, device=device)
    update: dict[str, Any] = {}
    log: list[str] = []
    if evidence.on_gpu and context.device == "cuda" and profilers_mode() == "auto":
        need_reference = not state.get("reference_profile")
        gather_gpu_evidence(task, candidate, context, evidence, need_reference=need_reference)
        if evidence.system_ok:
            profile = profile_from_system(evidence.system or {})
            evidence.profile = profile
        if evidence.reference_system and evidence.reference_system.get("status") == "ok":
            update["reference_profile"] = profile_from_system(evidence.reference_system).dump()
        if evidence.ncu is not None:
            log.append(f"profiler: ncu {evidence.ncu.status}: {len(evidence.ncu.kernels)} kernel launch(es)")
    ceilings = _ceilings(device, evidence.on_gpu)
    diagnosed = diagnosis.diagnose(
        evidence, plan=plan, test=test, ceilings=ceilings, precision=precision_of(task)
    )
    if diagnosed.pct_of_sol is not None and evidence.on_gpu:
        stand = f"{diagnosis.pct_text(diagnosed.pct_of_sol)} of SOL ({diagnosed.sol.sol_ms:.4g} ms)"  # type: ignore[union-attr]
        profile = profile.model_copy(update={"summary": f"{profile.summary}; {stand}"})
    guidance = diagnosis.retrieve_guidance(diagnosed)
    feedback = diagnosis.feedback_from(diagnosed, guidance)
    advice, read_diagnosis, why_none = policy_advice(
        context, task, plan, candidate, test, profile, diagnosed, guidance.notes
    )
    feedback = diagnosis.merge_advice(feedback, advice, policy_read_diagnosis=read_diagnosis)
    log += [f"profiler: {profile.summary}", f"diagnosis: {diagnosed.summary()}"]
    log.append(why_none or f"verifier advice: {feedback.summary}")
    tuning = (
        tune_launch(
            task, candidate, context, device, float(state.get("spent_s", 0.0)), profile.own_kernel_share
        )
        if evidence.on_gpu
        else None
    )
    if tuning is not None:
        log.append(f"tuner: {tuning.message}")
        if tuning.launch:
            suggestion = launch_suggestion(tuning.launch, tuning.speedup)
            feedback = feedback.model_copy(update={"suggestions": [suggestion, *feedback.suggestions]})
    if context.out_dir:
        report = {
            "candidate": candidate.id,
            "device": device,
            "profile": profile.dump(),
            "system": evidence.system,
            "reference_system": evidence.reference_system,
            "ncu": evidence.ncu.to_dict() if evidence.ncu is not None else None,
            "ceilings": ceilings.to_dict(),
            "diagnosis": diagnosed.to_dict(),
            "feedback": feedback.dump(),
            "tuning": vars(tuning) if tuning is not None else None,
        }
        write_report(context.out_dir, candidate, report)
    if tuning is not None and tuning.waited_s > 0:  # time, not work: the breakdown counts it as waiting
        update["node_seconds"] = {"profiler_wait": tuning.waited_s}
    return {
        **update,
        "profile": profile.dump(),
        "feedback": feedback.dump(),
        "coder_mode": "optimize",
        "log": log,
    }
