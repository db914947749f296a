"""Diagnosis: rules over a candidate's profile -> the main bottleneck, its evidence, ranked cited advice.

Why rules first: the profile already says what is wrong in numbers a rule can read (a GPU idle 60%
of the forward, 32 sectors per global load request, 24% theoretical occupancy capped by registers).
A rule turns such numbers into a named finding with an estimate of the forward's time at stake
(`impact`, 0..1), so findings rank across kinds: program-level ones (launch-bound, host syncs,
transfers, redundant passes over memory) and kernel-level ones weighted by the kernel's share of the
forward (uncoalesced access, bank conflicts, low occupancy from registers or shared memory, spills,
divergence, small grids, unhidden memory latency, GEMMs off the tensor cores). Speed of light
(tools.roofline) gives the program's % of SOL and each kernel's class (memory-, compute- or
latency-bound).

Each of the top findings is turned into a retrieval query made of its name, symptoms and metric names
(never code) against the guidance store (rag_corpus.store.retrieve); the notes that come back are
cited by id on the suggestions they support and listed in Feedback.sources. The result is
graph.artifacts.Feedback(kind="optimize"). Inputs are plain data (tool summaries, artifacts), so
every rule is tested on the CPU from captured profiles.

Modules: `catalogue` (every finding's tags, thresholds, weight and wording, as data), `facts` (the
numbers several rules share), `program_rules` and `kernel_rules` (the measurements), `engine`
(`diagnose`: run, rank, note), `findings` (`Diagnosis` and its text), `guidance` (retrieval,
`Feedback`, merging a policy's advice). The evidence itself is `nodes.support.evidence.Evidence`.
"""

from graph.artifacts import Finding
from nodes.diagnosis.catalogue import CATALOGUE, Rule
from nodes.diagnosis.engine import RULES, diagnose, kernel_table
from nodes.diagnosis.findings import Diagnosis, pct_text
from nodes.diagnosis.guidance import (
    MAX_SUGGESTIONS,
    NOTES_PER_FINDING,
    TOP_FINDINGS_CITED,
    Guidance,
    Retriever,
    default_retriever,
    feedback_from,
    merge_advice,
    retrieve_guidance,
)
from nodes.diagnosis.kernel_rules import MIN_KERNEL_SHARE, is_library_kernel
from nodes.diagnosis.program_rules import GEMM_OPS
from nodes.support.evidence import Evidence

__all__ = [
    "CATALOGUE",
    "GEMM_OPS",
    "MAX_SUGGESTIONS",
    "MIN_KERNEL_SHARE",
    "NOTES_PER_FINDING",
    "RULES",
    "TOP_FINDINGS_CITED",
    "Diagnosis",
    "Evidence",
    "Finding",
    "Guidance",
    "Retriever",
    "Rule",
    "default_retriever",
    "diagnose",
    "feedback_from",
    "is_library_kernel",
    "kernel_table",
    "merge_advice",
    "pct_text",
    "retrieve_guidance",
]
