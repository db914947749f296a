"""Captured profiler evidence (tests/fixtures/profiles) and small Plans, shared by the diagnosis tests.

Evidence comes from the profiler fixtures (real H200 captures where one exists, hand-made for the few
error cases; see the README there).
"""

from __future__ import annotations

from typing import Any

from conftest import FIXTURES

from graph.artifacts import OpInfo, Plan, TensorSpec
from nodes import diagnosis
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


def kernel(**values: Any) -> ncu.NcuResult:
    """One synthetic ncu record (register-limited, 25% occupancy, latency-bound) with `values` changed."""
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
