"""The added elementwise activations (SELU, CELU, softsign, log-sigmoid, shrinks) are covered, with
their parameters bound from calls and modules; numerics are in tests/gpu/test_scan_gpu.py ('activations')."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codegen.emit.assemble import Options, assemble
from codegen.frontend.ops import ELEMENTWISE
from codegen.schedule.plan import analyse
from graph.artifacts import Task

PROBLEM = Path(__file__).parents[1] / "fixtures" / "problems" / "level1" / "40_Activations.py"


def test_every_added_activation_is_one_of_our_elementwise_ops_with_its_parameters() -> None:
    analysis = analyse(Task(name=PROBLEM.stem, path=str(PROBLEM), source=PROBLEM.read_text()))
    specs: dict[str, list[Any]] = {}
    for spec in analysis.specs:
        specs.setdefault(spec.op, []).append(spec)
    for op in ("selu", "celu", "softsign", "logsigmoid", "tanhshrink", "hardshrink", "softshrink"):
        assert op in specs and all(s.family == ELEMENTWISE for s in specs[op]), op
    assert sorted(s.args["params"]["alpha"] for s in specs["celu"]) == [0.7, 1.3]
    assert sorted(s.args["params"]["lambd"] for s in specs["hardshrink"]) == [0.3, 0.5]
    assert [s.args["params"]["lambd"] for s in specs["softshrink"]] == [0.2]
    program = assemble(analysis, Options())
    assert program.uncovered_ops == [] and program.auto_demoted == []
    cuda = program.cuda_src
    for text in (
        "1.0507009873554805f",
        "expm1f(x_f0 / 0.699999988079071f)",
        "log1pf(expf(-fabsf(",
        "0.30000001192092896f",
    ):
        assert text in cuda, text
