"""The tracer's finer-grained capture on modules plain fx tracing cannot take (issue 19, point 2)."""

from __future__ import annotations

import textwrap

import torch

from codegen.frontend.capture import trace_problem
from codegen.policy import OfflinePolicy
from graph.artifacts import Plan, Task

HEADER = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def plan_of(body: str, name: str = "fallback") -> Plan:
    source = HEADER + textwrap.dedent(body)
    return OfflinePolicy().plan(Task(name=name, path="<memory>", source=source), None)


def kinds(plan: Plan) -> list[str]:
    return [g.kind for g in plan.groups]


ENCODER = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True, norm_first={norm_first})
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


def get_inputs():
    return [torch.rand(2, 16, 64)]


def get_init_inputs():
    return []
"""


def test_transformer_encoder_is_traced_into_its_operators() -> None:
    for norm_first in (True, False):
        plan = plan_of(ENCODER.replace("{norm_first}", str(norm_first)))
        assert plan.traced
        assert plan.uncovered_ops == []
        # per layer: qkv GEMM, fused attention (its weights unread), out-proj, two norms, FFN: 2 layers
        assert kinds(plan).count("attention") == 2 and kinds(plan).count("layer_norm") == 4
        assert kinds(plan).count("softmax") == 0 and kinds(plan).count("gemm") >= 2 * 4


MHA = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 8, batch_first={batch_first})

    def forward(self, x):
        out, _ = self.attn(x, x, x)
        return out


def get_inputs():
    return [torch.rand(2, 16, 64)]


def get_init_inputs():
    return []
"""


def test_multihead_attention_becomes_gemms_and_fused_attention() -> None:
    for batch_first in (True, False):
        plan = plan_of(MHA.replace("{batch_first}", str(batch_first)))
        assert plan.traced and plan.uncovered_ops == []
        assert kinds(plan).count("attention") == 1 and kinds(plan).count("softmax") == 0
        assert "multiheadattention" not in plan.covered_ops


def test_unused_attention_weights_are_not_computed() -> None:
    _, traced = trace_problem(HEADER + textwrap.dedent(MHA.replace("{batch_first}", "True")), "mha")
    assert not any(n.target in ("mean", torch.softmax) for n in traced.graph.nodes)
    assert any(n.name == "attention" for n in traced.graph.nodes)  # the fused product (attention_ops)


SDPA = """
class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal={causal}, dropout_p={p})


def get_inputs():
    return [torch.rand(2, 4, 32, 16) for _ in range(3)]


def get_init_inputs():
    return []
"""


def test_sdpa_is_fused_attention_and_dropout_keeps_the_call() -> None:
    plain = plan_of(SDPA.replace("{causal}", "False").replace("{p}", "0.0"))
    assert plain.uncovered_ops == [] and kinds(plain) == ["attention"]
    causal = plan_of(SDPA.replace("{causal}", "True").replace("{p}", "0.0"))
    assert causal.uncovered_ops == [] and kinds(causal) == ["attention"]
    dropout = plan_of(SDPA.replace("{causal}", "False").replace("{p}", "0.1"))
    assert dropout.uncovered_ops == ["scaled_dot_product_attention"]


def test_sdpa_decomposition_matches_pytorch() -> None:
    q, k, v = (torch.randn(2, 4, 32, 16, dtype=torch.float64) for _ in range(3))  # the traced shapes
    source = HEADER + textwrap.dedent(SDPA.replace("{causal}", "True").replace("{p}", "0.0"))
    _, traced = trace_problem(source, "sdpa")
    module = torch.fx.GraphModule(traced.root, traced.graph)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(module.to("cpu")(q, k, v), expected)


UNTRACEABLE_CHILD = """
class PartSums(nn.Module):
    def forward(self, x):
        out = x
        for part in x.split(16, dim=1):  # fx cannot iterate a proxy; meta tensors can
            out = out + part.sum(dim=1, keepdim=True)
        return out


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)
        self.sums = PartSums()
        self.out = nn.Linear(32, 8)

    def forward(self, x):
        return self.out(torch.relu(self.sums(self.fc(x))))


def get_inputs():
    return [torch.rand(64, 32)]


def get_init_inputs():
    return []
"""


def test_a_submodule_fx_cannot_trace_is_kept_alone() -> None:
    plan = plan_of(UNTRACEABLE_CHILD)
    assert plan.traced
    assert plan.uncovered_ops == ["partsums"]  # the submodule, not the model's whole forward
    assert kinds(plan).count("gemm") == 2


BUFFER_MASK = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(16, 16)))

    def forward(self, x):
        t = x.size(-1)
        return torch.softmax(x.masked_fill(self.mask[:t, :t] == 0, float("-inf")), dim=-1)


def get_inputs():
    return [torch.rand(4, 8, 8)]


def get_init_inputs():
    return []
"""


def test_a_mask_sliced_from_a_buffer_is_part_of_the_graph() -> None:
    plan = plan_of(BUFFER_MASK)
    assert plan.traced and "forward" not in plan.uncovered_ops
    assert "softmax" in kinds(plan)
