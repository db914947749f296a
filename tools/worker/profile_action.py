"""The profile action: where a candidate's forward spends its device time, by the torch profiler.

Why in the worker: the verifier's advice needs the candidate's top kernels and how much of the time
is in its own kernels; with `profile_reference`, the reference's summary and the operator coverage
(how much of the reference's GPU time left PyTorch) come from the same run and the same inputs.
"""

from __future__ import annotations

import types

import torch

from tools.protocol import EvalRequest, EvalResponse
from tools.worker import dynamic_checks, torch_profile
from tools.worker.harness import Settings, run_or_fail
from tools.worker.reporting import Progress


def profile(
    request: EvalRequest,
    response: EvalResponse,
    progress: Progress,
    problem: types.ModuleType,
    models: tuple[torch.nn.Module, torch.nn.Module],
    device: torch.device,
) -> None:
    """Profile the candidate's forward (and, when asked, the reference's and the operator coverage)."""
    settings = Settings(request)
    reference, candidate = models
    inputs = settings.seeded_inputs(problem, device)
    own = set(response.get("build", {}).get("kernels", []))
    progress("profiling ModelNew")
    info = run_or_fail(
        "ModelNew", "profiled", lambda: torch_profile.profile_forward(candidate, inputs, device, own)
    )
    if request.get("profile_reference", False):
        progress("profiling Model")
        info["reference"] = run_or_fail(
            "Model",
            "profiled",
            lambda: torch_profile.profile_forward(reference, inputs, device, (), own_is_outside_ops=False),
        )
        if device.type == "cuda":
            cand = run_or_fail(
                "ModelNew", "profiled", lambda: dynamic_checks.profile_split(candidate, inputs, device, own)
            )
            ref = run_or_fail(
                "Model", "profiled", lambda: dynamic_checks.profile_split(reference, inputs, device, ())
            )
            response["operator_coverage"] = dynamic_checks.coverage(cand, ref)
            response["findings"] = dynamic_checks.profile_findings(cand, own)
    response["profile"] = info  # type: ignore[typeddict-item]
    response["message"] = (
        f"{info['device_ms']:.4g} ms {'on device' if device.type == 'cuda' else 'on CPU'} per forward, "
        f"{info['kernel_count']} {'launches' if device.type == 'cuda' else 'top-level ops'}, "
        f"{info['own_kernel_share']:.0%} in the program's own code"
    )
