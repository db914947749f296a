"""On a GPU: the offline policy's recurrent programs (LSTM / GRU / RNN) against float64 PyTorch, and their speed.

Cases: every variant the RNN family generates (1-3 layers, bidirectional, batch_first or not, with or
without initial states, no bias, tanh and relu RNNs, a module's (h_n, c_n) returned) at small odd
sizes, plus the suite's recurrent problems at full size. Each case, with TF32 off (the strict
harness's setting; TF32 mode runs the reference's own cuDNN call, codegen.schedule.precision):
allclose(atol=rtol=1e-4) against the fp32 reference, the error against a float64 reference within
max(1e-5, 16 x the fp32 reference's own), two calls agreeing; then ours against eager, timed. The
suite's problems also run with the launch knob `fused` at 0 (stitch_set_launch: a cuBLASLt GEMM and a
cell kernel a step, where the default is one kernel a step), checked the same way and timed beside it.

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_rnn_gpu.py --write out/rnn-gpu
and run there (out/rnn-gpu carried) with
  STITCH_RNN_PROGRAMS=out/rnn-gpu python3 -m pytest -q -s tests/gpu/test_rnn_gpu.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from evals.device.host_overhead import back_to_back_ms

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evals" / "suite"

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = {module}

    def forward(self, {params}):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


def case(module: str, x: tuple[int, ...], states: list[tuple[int, ...]], body: str) -> str:
    params = ", ".join(["x", "h0", "c0"][: 1 + len(states)])
    inputs = ", ".join(f"torch.rand{s} * 2 - 1" for s in [x, *states])
    return PROBLEM.format(module=module, params=params, body=body, inputs=inputs)


CASES: dict[str, str] = {
    "lstm 1 layer batch_first": case(
        "nn.LSTM(33, 40, batch_first=True)", (3, 17, 33), [(1, 3, 40), (1, 3, 40)], "self.rnn(x, (h0, c0))[0]"
    ),
    "lstm 2 layers bidirectional seq-first no states": case(
        "nn.LSTM(20, 24, 2, bidirectional=True)", (13, 5, 20), [], "self.rnn(x)[0]"
    ),
    "lstm 3 layers returns h_n and c_n": case(
        "nn.LSTM(16, 32, 3, batch_first=True)",
        (4, 9, 16),
        [(3, 4, 32), (3, 4, 32)],
        "self.rnn(x, (h0, c0))[1][0] + 2 * self.rnn(x, (h0, c0))[1][1]",
    ),
    "gru 2 layers bidirectional with h0": case(
        "nn.GRU(12, 28, 2, batch_first=True, bidirectional=True)",
        (6, 11, 12),
        [(4, 6, 28)],
        "self.rnn(x, h0)[0]",
    ),
    "gru no bias seq-first, h_n": case(
        "nn.GRU(10, 36, bias=False)", (7, 3, 10), [(1, 3, 36)], "self.rnn(x, h0)[1]"
    ),
    "rnn tanh 2 layers": case("nn.RNN(8, 24, 2, batch_first=True)", (5, 19, 8), [], "self.rnn(x)[0]"),
    "rnn relu bidirectional": case(
        "nn.RNN(8, 16, nonlinearity='relu', bidirectional=True)",
        (21, 2, 8),
        [(2, 2, 16)],
        "self.rnn(x, h0)[0]",
    ),
}
SUITE_CASES = ["level3/11_LSTM", "level3/12_GRUBidirectional", "level3/19_LSTMClassifier"]


def write_programs(folder: Path, arch: str = "sm_90") -> list[dict[str, Any]]:
    """Write every case's problem and program plus manifest.json; needs codegen (pydantic)."""
    from codegen.policy import OfflinePolicy
    from graph.artifacts import Task
    from graph.context import Context

    folder.mkdir(parents=True, exist_ok=True)
    sources = dict(CASES)
    for name in SUITE_CASES:
        path = SUITE / f"{name}.py"
        if path.exists():
            sources[name] = path.read_text()
    policy = OfflinePolicy(Context(gpu_arch=arch))
    manifest = []
    for i, (label, source) in enumerate(sources.items()):
        task = Task(name=f"rnn_case_{i}", path="<memory>", source=source)
        plan = policy.plan(task, None)
        program = policy.write(task, plan, 1)
        (folder / f"case_{i}_problem.py").write_text(source)
        (folder / f"case_{i}_program.py").write_text(program.source)
        manifest.append({"label": label, "index": i, "uncovered": sorted(set(plan.uncovered_ops))})
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _load(path: Path, context: dict[str, Any]) -> dict[str, Any]:
    exec(compile(path.read_text(), str(path), "exec"), context)
    return context


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _leaves(v)]
    return []


def _clock(fn: Any, runs: int = 20) -> float:
    return back_to_back_ms(fn, [], calls=runs)


def _check(context: dict[str, Any], reference: Any, inputs: list[Any]) -> dict[str, Any]:
    """The program loaded in `context`: its agreement with the fp32 and float64 references, its time."""
    torch.manual_seed(0)
    ours = context["ModelNew"](*context["get_init_inputs"]()).cuda()
    ours.load_state_dict(reference.state_dict())
    with torch.no_grad():
        expected = _leaves(reference(*inputs))
        got = _leaves(ours(*inputs))
        again = _leaves(ours(*inputs))
        ref64 = _leaves(reference.double()(*[t.double() for t in inputs]))
        reference.float()
    row: dict[str, Any] = {}
    row["allclose"] = all(
        torch.allclose(g, e, atol=1e-4, rtol=1e-4) for g, e in zip(got, expected, strict=True)
    )
    row["repeatable"] = all(torch.equal(g, a) for g, a in zip(got, again, strict=True))
    row["err64_ours"] = max(float((g.double() - r).abs().max()) for g, r in zip(got, ref64, strict=True))
    row["err64_eager"] = max(
        float((e.double() - r).abs().max()) for e, r in zip(expected, ref64, strict=True)
    )
    with torch.no_grad():
        row["eager_ms"] = _clock(lambda: reference(*inputs))
        row["ours_ms"] = _clock(lambda: ours(*inputs))
    return row


def run_case(folder: Path, entry: dict[str, Any]) -> dict[str, Any]:
    i = entry["index"]
    context = _load(folder / f"case_{i}_problem.py", {})
    torch.manual_seed(0)
    reference = context["Model"](*context["get_init_inputs"]()).cuda()
    torch.manual_seed(1)
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in context["get_inputs"]()]
    _load(folder / f"case_{i}_program.py", context)
    row: dict[str, Any] = {"label": entry["label"]}
    row.update(_check(context, reference, inputs))
    if entry["label"] in SUITE_CASES:  # the same program with every recurrent group unfused
        groups = [g for g, knobs in context["STITCH_LAUNCH"].items() if "fused" in knobs]
        assert groups, f"{entry['label']}: no group with the launch knob 'fused'"
        for group in groups:
            context["stitch_set_launch"](group, "fused", 0)
        row["unfused"] = _check(context, reference, inputs)
        row["unfused_ms"] = row["unfused"]["ours_ms"]
    return row


def test_rnn_programs_match_float64_and_time_against_eager() -> None:
    folder = Path(os.environ.get("STITCH_RNN_PROGRAMS", "out/rnn-gpu"))
    if not (folder / "manifest.json").exists():
        pytest.skip(f"no {folder}/manifest.json: write it on the CPU (see the module docstring)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False  # the strict harness; TF32 mode runs PyTorch's own RNN
    manifest = json.loads((folder / "manifest.json").read_text())
    only = os.environ.get("STITCH_RNN_ONLY", "")
    rows = [run_case(folder, m) for m in manifest if only in m["label"]]
    print(
        f"\n{'case':50s} {'ok':>3s} {'rep':>3s} {'err64 ours':>11s} {'err64 eager':>11s} {'eager ms':>9s} {'ours ms':>8s}"
        f" {'fused=0 ms':>10s}"
    )
    for r in rows:
        print(
            f"{r['label']:50s} {'y' if r['allclose'] else 'N':>3s} {'y' if r['repeatable'] else 'N':>3s}"
            f" {r['err64_ours']:11.2e} {r['err64_eager']:11.2e} {r['eager_ms']:9.3f} {r['ours_ms']:8.3f}"
            f" {r.get('unfused_ms', float('nan')):10.3f}"
        )
    results = os.environ.get("STITCH_RNN_RESULTS")
    if results:
        Path(results).write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert all(not m["uncovered"] for m in manifest), [m for m in manifest if m["uncovered"]]
    for r in rows:
        for checked in (r, r.get("unfused", r)):
            assert checked["allclose"] and checked["repeatable"], r
            assert checked["err64_ours"] <= max(1e-5, 16 * checked["err64_eager"]), r


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", type=Path, required=True, help="CPU: write programs and manifest.json here"
    )
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    for m in write_programs(args.write, args.arch):
        print(m["label"], "uncovered:", m["uncovered"])
