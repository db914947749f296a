"""The offline policy's advice: which of its optimisations the profile diagnosis asks for.

The profile node diagnoses every passing candidate once (`nodes.diagnosis`: launch-bound, the gap
to speed of light, kernel findings, ...) and hands the findings to `advise` as data
(`graph.artifacts.Finding`). The offline coder can apply only a few program-wide options, so
advising is a lookup: `REMEDIES` maps findings to the options that answer them. Suggestions carry the
option's tag in brackets, e.g. `[cuda_graph]`, which the optimise step recognises; free-text advice
(the diagnosis's own wording, another policy's) is matched by keywords. A `[launch] {...}`
suggestion carries the launch table the GPU tuner measured faster (nodes.support.tuning); it is
data, not a keyword, and the optimise step writes it into the program first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from codegen.emit.assemble import Options
from graph.artifacts import Feedback, Finding, Profile
from graph.launch_advice import launch_from, merge_launch

_KEYWORDS = {
    "cuda_graph": (
        "[cuda_graph]",
        "cuda graph",
        "cuda-graph",
        "cudagraph",
        "launch overhead",
        "launch-bound",
    ),
    "ew_unroll": ("[ew_unroll]", "unroll", "vector width", "bytes in flight", "wider loads"),
    "streams": ("[streams]", "side stream", "multi-stream", "independent branches", "concurren"),
}

OWN_ELEMENTWISE = "own elementwise"  # a Remedy's kernel condition: one of our elementwise kernels


@dataclass(frozen=True)
class Remedy:
    """A finding the offline coder can answer, and with which option."""

    finding: str  # the diagnosis's finding id (graph.artifacts.Finding.rule)
    optimisation: str  # the option it turns on: cuda_graph or ew_unroll (streams follow a graph)
    kernel: str  # "" (any), or OWN_ELEMENTWISE: the finding's kernel, else the profile's top kernel
    advice: str  # the tagged suggestion


CUDA_GRAPH_ADVICE = (
    "[cuda_graph] capture the whole forward in a CUDA graph (static input buffers, cloned output)"
)
EW_UNROLL_ADVICE = (
    "[ew_unroll] more bytes in flight per thread in the elementwise kernel (two float4 per step)"
)

REMEDIES = (
    Remedy("launch-bound", "cuda_graph", "", CUDA_GRAPH_ADVICE),
    Remedy("host-bound", "cuda_graph", "", CUDA_GRAPH_ADVICE),
    # below SOL with our elementwise kernel the largest: it reaches the bandwidth with more loads in flight
    Remedy("sol-gap", "ew_unroll", OWN_ELEMENTWISE, EW_UNROLL_ADVICE),
    Remedy("latency-bound", "ew_unroll", OWN_ELEMENTWISE, EW_UNROLL_ADVICE),
)


@dataclass
class Optimisation:
    name: str
    options: Options
    summary: str


def is_own_elementwise(kernel_name: str) -> bool:
    """One of the offline policy's elementwise kernels (stitch_ew_*), by its (demangled) name."""
    lowered = kernel_name.lower()
    return "stitch" in lowered and "ew" in lowered


def _concerns(remedy: Remedy, finding: Finding, profile: Profile | None) -> bool:
    if remedy.kernel != OWN_ELEMENTWISE:
        return True
    if finding.kernel:
        return is_own_elementwise(finding.kernel)
    top = profile.top[0].name if profile is not None and profile.top else ""
    return is_own_elementwise(top)


def advice_for(findings: Sequence[Finding], profile: Profile | None = None) -> Feedback:
    """The optimisations the diagnosis's findings ask for, as tagged suggestions in REMEDIES order."""
    asked: dict[str, tuple[Remedy, Finding]] = {}
    for remedy in REMEDIES:
        if remedy.optimisation in asked:
            continue
        found = next(
            (f for f in findings if f.rule == remedy.finding and _concerns(remedy, f, profile)), None
        )
        if found is not None:
            asked[remedy.optimisation] = (remedy, found)
    if not asked:
        summary = "the diagnosis names nothing the offline optimisations answer"
    else:
        summary = "offline optimisations for the diagnosis: " + ", ".join(
            f"{name} ({finding.rule})" for name, (_, finding) in asked.items()
        )
    evidence = [
        f"{finding.rule}{' in ' + finding.kernel if finding.kernel else ''} "
        f"(~{finding.impact:.0%} of the forward at stake) -> {name}"
        for name, (_, finding) in asked.items()
    ]
    return Feedback(
        kind="optimize",
        summary=summary,
        evidence="\n".join(evidence),
        suggestions=[remedy.advice for remedy, _ in asked.values()],
    )


def requested(feedback: Feedback) -> list[str]:
    """Optimisation names the feedback asks for, in its order."""
    names: list[str] = []
    for text in [feedback.summary, *feedback.suggestions]:
        lowered = text.lower()
        for name, words in _KEYWORDS.items():
            if name not in names and any(w in lowered for w in words):
                names.append(name)
    return names


def choose_optimisation(
    feedback: Feedback,
    options: Options,
    traced: bool,
    launches: int,
    has_elementwise: bool,
    streams: int = 1,
    graph_pays: bool = True,
) -> Optimisation | None:
    """The first applicable optimisation the feedback asks for (or a default by the program's shape).

    A tuned launch table that changes this program's knobs comes first: it is a measurement. A CUDA
    graph is offered only where it `graph_pays` (codegen.schedule.plan.graph_pays: its input copies
    cost less than the host time it saves), whatever the feedback asks.
    """
    tuned = launch_from(feedback)
    merged = merge_launch(options.launch, tuned)
    if merged != options.launch:
        count = sum(len(k) for k in tuned.values())
        return Optimisation(
            "launch",
            replace(options, levels=dict(options.levels), launch=merged),
            f"optimize: {count} launch knob(s) set as the GPU tuner measured them fastest",
        )
    applicable: dict[str, Optimisation] = {}
    if traced and graph_pays and not options.cuda_graph and launches >= 2:
        new = replace(options, cuda_graph=True, levels=dict(options.levels))
        applicable["cuda_graph"] = Optimisation(
            "cuda_graph", new, "optimize: capture the forward in a CUDA graph"
        )
    if options.cuda_graph and not options.streams and streams > 1:
        new = replace(options, streams=True, levels=dict(options.levels))
        applicable["streams"] = Optimisation(
            "streams",
            new,
            f"optimize: independent branches on {streams - 1} side stream(s) inside the CUDA graph",
        )
    if has_elementwise and options.ew_unroll == 1:
        new = replace(options, ew_unroll=2, levels=dict(options.levels))
        applicable["ew_unroll"] = Optimisation(
            "ew_unroll", new, "optimize: two float4 per thread per step in elementwise kernels"
        )
    for name in requested(feedback):
        if name in applicable:
            return applicable[name]
    if "cuda_graph" in requested(feedback) and "streams" in applicable:  # launch-bound with a graph already
        return applicable["streams"]
    if not requested(feedback):
        for name in ("cuda_graph", "streams", "ew_unroll"):
            if name in applicable and (name != "cuda_graph" or launches >= 6):
                return applicable[name]
    return None
