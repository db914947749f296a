"""What the plan says about a recurrent group: its template name, launches and subtask text."""

from __future__ import annotations

from codegen.frontend.rnn_ops import RnnParams
from codegen.schedule.fusion import Group


def _params(group: Group) -> RnnParams:
    assert group.anchor is not None
    params: RnnParams = group.anchor.args["params"]
    return params


def rnn_launches(params: RnnParams) -> int:
    """Per layer and direction: the input GEMM, one fused step kernel per step, the h_n copy."""
    return params.layers * params.directions * (2 + params.seq)


def rnn_launches_of(group: Group) -> int:
    return rnn_launches(_params(group))


def rnn_template(group: Group) -> str:
    return f"cublaslt_rnn_{_params(group).mode}+fused_step"


def rnn_describe(group: Group) -> tuple[str, str]:
    p = _params(group)
    kind = "bidirectional " if p.directions == 2 else ""
    title = f"{kind}{p.mode} x{p.layers} layers, T={p.seq}, batch {p.batch}, hidden {p.hidden}"
    detail = (
        "per layer and direction: one cuBLASLt GEMM for every step's input projection (bias fused), "
        "then a host loop in our C++ with one kernel per step: the recurrent product of a block's hidden "
        "units (all their gates) and their cell, writing h into the output sequence"
    )
    return title, detail
