"""Code for a recurrent group (LSTM / GRU / Elman RNN module): one launcher call per layer and direction.

The launcher (templates/rnn.cuh) runs the whole sequence of one layer and direction: one GEMM for
every step's input projection, then a host loop in our C++ with one kernel per step (the recurrent
product and the cell fused; the launch knob `fused` at 0 runs a cuBLASLt GEMM and a cell kernel
instead: the default past one batch tile, and the tuner compares both). The Python side only
allocates (outputs, states, workspace) and walks the layers and directions, reading the module's
weights by PyTorch's parameter names; the module's (output, h_n) or (output, (h_n, c_n)) comes back
in the structure PyTorch returns.
"""

from __future__ import annotations

from codegen.emit.chain import ModuleRef
from codegen.emit.helper import Helper
from codegen.emit.kernels import GroupWriter
from codegen.frontend.rnn_ops import GATES, RnnParams
from codegen.schedule.fusion import Group
from codegen.schedule.rnn import rnn_launches, rnn_template

RNN_MODES = {"lstm": 0, "gru": 1, "rnn_tanh": 2, "rnn_relu": 3}
# The fused step's default up to one batch tile of its kernel (16 entries); a larger batch re-reads
# W_hh per tile, and at batch 32 (suite level3/19, H100) the fused step took 16.4 ms against 10.0 ms
# unfused. The tuner tries the other value per shape either way (runtime.STITCH_LAUNCH_CHOICES).
FUSED_BATCH = 16
RNN_PARAMS: list[tuple[str, str]] = [
    ("const float*", "x"),
    ("int64_t", "x_ld"),
    ("const float*", "w_ih"),
    ("const float*", "w_hh"),
    ("const float*", "b_ih"),
    ("const float*", "b_hh"),
    ("const float*", "h0"),
    ("const float*", "c0"),
    ("float*", "out"),
    ("float*", "hn"),
    ("float*", "cn"),
    ("float*", "ws"),
    ("int64_t", "seq"),
    ("int64_t", "batch"),
    ("int64_t", "in_size"),
    ("int64_t", "hidden"),
    ("int64_t", "out_ld"),
    ("int64_t", "dir_offset"),
    ("int", "mode"),
    ("int", "reverse"),
    ("int", "batch_first"),
    ("int", "fused"),
]


def write_rnn(writer: GroupWriter, group: Group, helper: Helper) -> tuple[str, int]:
    """Fill `helper` for an RNN group; returns (template, launches)."""
    writer.unit.use("gemm", "rnn")
    writer.unit.library_launcher("rnn_layer", RNN_PARAMS, group.id)
    anchor = group.anchor
    assert anchor is not None
    args = anchor.args
    p: RnnParams = args["params"]
    x = helper.ref(args["input"])
    mod = helper.ref(ModuleRef(args["module"]))
    lstm = p.mode == "lstm"
    states = (p.layers * p.directions, p.batch, p.hidden)
    seq_shape = (p.batch, p.seq) if p.batch_first else (p.seq, p.batch)
    gates = GATES[p.mode.split("_")[0]] * p.hidden
    fused = helper.knob("fused", 1 if p.batch <= FUSED_BATCH else 0)
    lines = [
        f"x = {x}.contiguous()",
        "stream = _stitch_stream(x)",
        "alloc = dict(device=x.device, dtype=torch.float32)",
    ]
    for name, ref in (("h0", args.get("h0")), ("c0", args.get("c0") if lstm else None)):
        if ref is not None:
            lines.append(f"{name} = {helper.ref(ref)}.contiguous()")
        elif name == "h0" or lstm:
            lines.append(f"{name} = torch.zeros({states!r}, **alloc)")
    lines += [
        f"hn = torch.empty({states!r}, **alloc)",
        f"cn = torch.empty({states!r}, **alloc)" if lstm else "cn = None",
        f"ws = torch.empty({p.seq * p.batch * gates + p.batch * gates}, **alloc)",
        "layer_in = x",
        f"for layer in range({p.layers}):",
        f"    out = torch.empty({(*seq_shape, p.directions * p.hidden)!r}, **alloc)",
        f"    for d in range({p.directions}):",
        '        sfx = f"l{layer}_reverse" if d else f"l{layer}"',
        f"        w_ih = getattr({mod}, 'weight_ih_' + sfx).contiguous()",
        f"        w_hh = getattr({mod}, 'weight_hh_' + sfx).contiguous()",
        f"        b_ih = getattr({mod}, 'bias_ih_' + sfx).data_ptr() if {mod}.bias else 0",
        f"        b_hh = getattr({mod}, 'bias_hh_' + sfx).data_ptr() if {mod}.bias else 0",
        f"        k = layer * {p.directions} + d",
        "        c0_ptr, cn_ptr = (c0[k].data_ptr(), cn[k].data_ptr()) if cn is not None else (0, 0)",
        "        _ext.rnn_layer(layer_in.data_ptr(), layer_in.shape[-1], w_ih.data_ptr(), w_hh.data_ptr(), b_ih, b_hh,"
        " h0[k].data_ptr(), c0_ptr, out.data_ptr(), hn[k].data_ptr(), cn_ptr, ws.data_ptr(),"
        f" {p.seq}, {p.batch}, layer_in.shape[-1], {p.hidden}, {p.directions * p.hidden}, d * {p.hidden},"
        f" {RNN_MODES[p.mode]}, d, {int(p.batch_first)}, {fused}, stream)",
        "    layer_in = out",
        "result = (out, (hn, cn))" if lstm else "result = (out, hn)",
    ]
    helper.lines += lines
    helper.returns = ["result"]
    return rnn_template(group), rnn_launches(p)
