"""The worker's tune action on the CPU: a real worker process searches a program's launch knobs.

The candidate is plain PyTorch whose `threads` knob really changes its cost (the forward works in
chunks of that many elements, so small chunks pay more per-call overhead) and whose `unroll` knob
changes its output (so the search must reject it). The launch helpers are the generated programs'
own (codegen.emit.runtime), pasted as assemble pastes them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.worker_requests import affine_request, worker_candidate

from codegen.emit.assemble import LAUNCH_HELPERS, _runtime_source
from tools.evaluate import evaluate
from tools.worker import timing_window
from tools.worker.tune import same_output, tunable

CANDIDATE = """
import torch
import torch.nn as nn

STITCH_LAUNCH: dict[str, dict[str, int]] = {"g1": {"threads": 128, "unroll": 1}}

@HELPERS@


def _g1(x, scale, bias, launch):
    flat = x.reshape(-1)
    step = launch["threads"]
    parts = [flat[i : i + step] * scale + bias for i in range(0, flat.numel(), step)]
    out = torch.cat(parts).view_as(x)
    return out + bias if launch["unroll"] == 2 else out  # a knob that breaks the result


class ModelNew(nn.Module):
    def __init__(self, scale: float, bias: float):
        super().__init__()
        self.scale = scale
        self.bias = bias

    def forward(self, x):
        return _g1(x, self.scale, self.bias, STITCH_LAUNCH["g1"])
"""


def tunable_candidate() -> str:
    return CANDIDATE.replace("@HELPERS@", _runtime_source(LAUNCH_HELPERS))


def test_the_search_keeps_the_faster_threads_and_rejects_a_knob_that_changes_the_output(
    tmp_path: Path,
) -> None:
    request = affine_request(tunable_candidate(), tmp_path, action="tune", tune_budget_s=60)
    response = evaluate(request, timeout_s=300)
    assert response["status"] == "passed", response["message"]
    answer = response["tune"]  # type: ignore[typeddict-item]
    assert answer["complete"]
    # 16384 elements: 128 chunks of 128 against 16 of 1024; the larger chunks win by several times
    assert answer["launch"]["g1"]["threads"] >= 512, answer
    assert answer["table"]["g1"]["unroll"] == 1
    rejected = [t for t in answer["trials"] if t["knob"] == "unroll"]
    assert rejected and all(t["why"] == "changed the output" and not t["kept"] for t in rejected)
    assert answer["speedup"] > 1.5
    assert "tuned" in response["message"] and "side by side" in response["message"]


def test_a_search_cut_short_says_so_and_resumes_where_it_stopped(tmp_path: Path) -> None:
    cut = evaluate(
        affine_request(tunable_candidate(), tmp_path, action="tune", tune_budget_s=0), timeout_s=300
    )
    assert cut["status"] == "passed", cut["message"]
    answer = cut["tune"]  # type: ignore[typeddict-item]
    assert not answer["complete"] and answer["searched"] == [] and "budget reached" in cut["message"]
    resumed = affine_request(tunable_candidate(), tmp_path, action="tune", tune_skip=[["g1", "threads"]])
    rest = evaluate(resumed, timeout_s=300)["tune"]  # type: ignore[typeddict-item]
    assert rest["complete"] and rest["searched"] == [["g1", "unroll"]]
    assert {t["knob"] for t in rest["trials"]} == {"unroll"} and rest["launch"] == {}


# quiet_first_call.py made tunable, its every call refused outside the quiet timing window
IN_WINDOW_ONLY = """
STITCH_LAUNCH: dict[str, dict[str, int]] = {"g1": {"threads": 128}}

@HELPERS@

_plain_forward = ModelNew.forward


def _forward_in_window(self, x):
    if not _window_held():
        raise RuntimeError("called outside the quiet timing window")
    return _plain_forward(self, x)


ModelNew.forward = _forward_in_window
"""


def test_the_search_times_in_the_quiet_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(timing_window.WINDOW_ENV, str(tmp_path / "window"))
    source = worker_candidate("quiet_first_call.py") + IN_WINDOW_ONLY.replace(
        "@HELPERS@", _runtime_source(LAUNCH_HELPERS)
    )
    response = evaluate(affine_request(source, tmp_path, action="tune", tune_budget_s=5), timeout_s=300)
    assert response["status"] == "passed", response["message"]
    answer = response["tune"]  # type: ignore[typeddict-item]
    assert answer["trials"] and answer["window_wait_s"] >= 0


def test_a_program_without_knobs_is_answered_not_failed(tmp_path: Path) -> None:
    source = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def __init__(self, s, b):\n        super().__init__()\n\n    def forward(self, x):\n        return x * 2.0 + 0.5\n"
    response = evaluate(affine_request(source, tmp_path, action="tune"), timeout_s=300)
    assert response["status"] == "passed", response["message"]
    assert response["tune"]["launch"] == {}  # type: ignore[typeddict-item]
    assert "no STITCH_LAUNCH" in response["message"]


def test_the_setter_refuses_what_the_program_does_not_have() -> None:
    namespace: dict[str, object] = {}
    exec(tunable_candidate(), namespace)
    assert tunable(namespace) == ""
    setter = namespace["stitch_set_launch"]
    with pytest.raises(ValueError, match="no launch knob"):
        setter("g1", "threads", 100)  # type: ignore[operator]
    with pytest.raises(ValueError, match="no launch knob"):
        setter("g9", "threads", 256)  # type: ignore[operator]
    setter("g1", "threads", 256)  # type: ignore[operator]
    assert namespace["STITCH_LAUNCH"] == {"g1": {"threads": 256, "unroll": 1}}
    assert namespace["_STITCH_LAUNCH_STATE"] == [(("g1", (("threads", 256), ("unroll", 1))),)]


def test_same_output_compares_nested_results() -> None:
    import torch

    a = torch.tensor([1.0, float("nan")])
    assert same_output((a, [a]), (a.clone(), [a.clone()]))
    assert not same_output(a, a + 1e-3)
    assert not same_output((a,), (a, a))
