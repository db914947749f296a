"""Independent branches on side streams inside the CUDA graph (codegen/schedule/streams.py).

The placement is checked on an Inception-style block (four towers from one input, joined by a
concatenation), a plain chain (one stream), a forward with an in-place op (kept on one stream) and
a small hand-made graph; the written forward is compiled and its stream helper run off a GPU, where
it must do nothing. The offline coder turns the option on after the CUDA graph and off first when
a program fails.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch
import torch.fx as fx

from codegen.emit.assemble import Options, assemble
from codegen.emit.runtime import _StitchStreams
from codegen.policy import OfflinePolicy
from codegen.schedule.plan import analyse
from codegen.schedule.streams import StreamStep, plan_streams
from graph.artifacts import Feedback, Task

SUITE = Path(__file__).parents[2] / "evals" / "suite"


def task_of(path: Path) -> Task:
    return Task(name=path.stem, path=str(path), source=path.read_text())


def test_four_towers_run_on_four_streams_and_the_join_waits_for_each() -> None:
    analysis = analyse(task_of(SUITE / "level3" / "9_InceptionModule.py"))
    plain = assemble(analysis, Options(cuda_graph=True))
    assert plain.streams == 4 and "_StitchStreams" not in plain.source  # possible, not on by default
    program = assemble(analysis, Options(cuda_graph=True, streams=True))
    compile(program.source, "<program>", "exec")
    body = program.source.split("    def _stitch_forward(", 1)[1].split("    def _stitch_forward_tf32", 1)[0]
    for stream in (1, 2, 3):
        assert f"_ss.wait({stream}, 0)" in body and f"with _ss.on({stream}):" in body
    assert "_ss.wait(3, 1)" in body and "_ss.wait(3, 2)" in body  # the concatenation reads every tower
    assert body.index("_ss.join()") < body.index("return relu")
    tf32 = program.source.split("    def _stitch_forward_tf32", 1)[1]
    assert "_ss" not in tf32  # the TF32-matched path stays on one stream


def test_a_chain_and_an_in_place_forward_stay_on_one_stream() -> None:
    chain = analyse(task_of(SUITE / "level3" / "16_MiniGPTBlock.py"))
    assert assemble(chain, Options(cuda_graph=True, streams=True)).streams == 1
    source = textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(16, 16)
                self.b = nn.Linear(16, 16)

            def forward(self, x):
                y = self.a(x)
                z = self.b(x)
                y.add_(1.0)
                return y + z

        def get_inputs():
            return [torch.rand(8, 16)]

        def get_init_inputs():
            return []
        """
    )
    program = assemble(
        analyse(Task(name="inplace", path="<memory>", source=source)), Options(cuda_graph=True, streams=True)
    )
    assert "_StitchStreams(" not in program.source.split("class ModelNew", 1)[1]


def _node(graph: fx.Graph, name: str, *inputs: fx.Node) -> fx.Node:
    return graph.call_function(torch.add, tuple(inputs) or (1, 1), name=name)


def test_the_placement_continues_chains_and_waits_once_per_value() -> None:
    graph = fx.Graph()
    x = graph.placeholder("x")
    a, b, c = _node(graph, "a", x), _node(graph, "b", x), _node(graph, "c", x)
    view = _node(graph, "view", b)
    b2 = _node(graph, "b2", view)
    d = _node(graph, "d", a, b2)
    steps = [
        StreamStep([a], [x], True),
        StreamStep([b], [x], True),
        StreamStep([c], [x], True),
        StreamStep([view], [b], False),  # a view launches nothing and takes b's stream
        StreamStep([b2], [view], True),
        StreamStep([d], [a, b2], True),
    ]
    plan = plan_streams(steps, [x], limit=3)
    assert plan.stream == [0, 1, 2, None, 1, 1]  # c opens the last stream; b2 continues b's chain
    assert plan.waits == [[], [(1, 0)], [(2, 0)], [], [], []]  # d's read of a is covered by (1, 0)
    assert plan.streams == 3 and plan.parallel
    one = plan_streams(steps, [x], limit=1)
    assert set(one.stream) <= {0, None} and not one.parallel


def test_the_stream_helper_does_nothing_off_a_gpu() -> None:
    streams = _StitchStreams(torch.zeros(2), 4)
    with streams.on(2):
        streams.wait(2, 0)
    streams.join()
    assert streams.streams == []


def test_the_coder_adds_streams_after_the_graph_and_drops_them_first_on_a_failure() -> None:
    policy = OfflinePolicy()
    task = task_of(SUITE / "level3" / "9_InceptionModule.py")
    plan = policy.plan(task, None)
    first = policy.write(task, plan, 1)
    idle = Feedback(kind="optimize", summary="nothing in particular")
    graphed = policy.revise(task, plan, first, idle, "optimize", 2)
    if not graphed.meta["options"]["cuda_graph"]:  # the plan may capture from the start
        graphed = first
    branched = policy.revise(task, plan, graphed, idle, "optimize", 3)
    assert branched.meta["options"]["streams"] and "_StitchStreams(x, 4)" in branched.source
    wrong = Feedback(kind="wrong_output", summary="max abs error 3.1 at [0, 5]")
    fixed = policy.revise(task, plan, branched, wrong, "fix", 4)
    assert not fixed.meta["options"]["streams"] and fixed.meta["options"]["cuda_graph"]
    assert "side streams switched off" in fixed.summary
