"""Per-group code: the writer that turns each covered group into CUDA launchers and a Python helper.

Every covered group becomes a Python function `_g<id>(...)` in the program (codegen/emit/helper.py).
Its elementwise math is a `Chain` (codegen/emit/chain.py) compiled into functor structs
(codegen/emit/functors.py) that the template libraries instantiate. This module writes the groups of
the core families (elementwise, GEMM, softmax / layer norm / reductions, BatchNorm) and hands the
others to the family writers it is given (conv, pool, norm, scan, rnn), so it imports none of them.
Operands whose shape equals the group's output shape are "full" (vector loads); others are
"broadcast" and read element e at (e / inner) % count, both computed at run time from shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from codegen.emit.chain import (
    Chain,
    ChainOp,
    CodegenError,
    ModuleRef,
    Token,
    build_chain,
    is_view,
    rows_read_in_place,
    spec_ops,
)
from codegen.emit.cuda_unit import CudaUnit
from codegen.emit.functors import epi_functor, ew_functor, pro_functor
from codegen.emit.helper import Helper
from codegen.emit.row_io import Load, RowIO, prefixed
from codegen.emit.row_io import functor_init as _init
from codegen.frontend.ops import Classifier
from codegen.schedule.fusion import (
    BATCH_NORM,
    ELEMENTWISE,
    GEMM,
    LAYER_NORM,
    REDUCTION,
    SOFTMAX,
    Group,
    gemm_folds,
)

EW_THREADS = 256  # elementwise threads per block before tuning (STITCH_LAUNCH's default)
BN_OF_CONCAT = "batch_norm_of_concat"  # the family writer of a BatchNorm over a concatenation

# ---- group code -------------------------------------------------------------------------------------


@dataclass
class GroupCode:
    helper: Helper
    template: str
    launches: int


FamilyWriter = Callable[["GroupWriter", Group, "Helper"], tuple[str, int]]


class GroupWriter:
    """Writes the CUDA code and the Python helper of each covered group into one CudaUnit."""

    def __init__(
        self,
        classifier: Classifier,
        unit: CudaUnit,
        forward_names: dict[fx.Node, str],
        ew_unroll: int = 1,
        family_writers: Mapping[str, FamilyWriter] | None = None,
    ):
        self.classifier = classifier
        self.unit = unit
        self.forward_names = forward_names
        self.ew_unroll = ew_unroll
        # Writers of group kinds that live in their own modules and build on this one (the caller
        # passes them in, so this module never imports them: no import circle).
        self.family_writers = dict(family_writers or {})

    def shape(self, ref: Any) -> tuple[int, ...]:
        value = self.classifier.value(ref)
        if not isinstance(value, torch.Tensor):
            raise CodegenError(f"{ref} is not a tensor")
        return tuple(value.shape)

    def write(self, group: Group) -> GroupCode:
        ops = ", ".join(s.op for s in group.specs)
        helper = Helper(group.id, f"{group.kind} [{ops}]", self.forward_names)
        if group.kind == ELEMENTWISE:
            template, launches = self._elementwise(group, helper)
        elif group.kind == GEMM:
            template, launches = self._gemm(group, helper)
        elif group.kind in (SOFTMAX, LAYER_NORM, REDUCTION):
            template, launches = self._row(group, helper)
        elif group.kind == BATCH_NORM:
            template, launches = self.write_batch_norm(group, helper)
        elif group.kind in self.family_writers:
            template, launches = self.family_writers[group.kind](self, group, helper)
        else:
            raise CodegenError(f"no writer for group kind {group.kind}")
        return GroupCode(helper=helper, template=template, launches=launches)

    # -- elementwise chains (standalone or as an epilogue kernel after a library call) --
    def _ew_call(
        self, helper: Helper, chain: Chain, outputs: list[Any], group: Group, prefix: str, inplace: str | None
    ) -> list[str]:
        """Emit the launch of one elementwise kernel; returns the Python names of its outputs."""
        self.unit.use("elementwise")
        shape_var = f"{prefix}shape"
        helper.prepare_chain(chain, prefix, shape_var, compute_shape=True)
        device_of = f"{prefix}f0" if chain.full else f"{prefix}b0"
        out_names: list[str] = []
        for j, _key in enumerate(outputs):
            name = f"{prefix}o{j}"
            if inplace is not None and j == len(outputs) - 1:
                helper.lines.append(f"{name} = {inplace}")
            else:
                helper.lines.append(
                    f"{name} = torch.empty({shape_var}, device={device_of}.device, dtype=torch.float32)"
                )
            out_names.append(name)
        struct, out_fields = ew_functor(self.unit, chain, outputs, group.id)
        params = chain.fields() + out_fields + [("int64_t", "n"), ("int", "unroll"), ("int", "threads")]
        init = _init(struct, "f", chain.fields() + out_fields, "")
        aligned = chain.aligned() + [f"stitch_aligned16(o{j})" for j in range(len(outputs))]
        body = "\n".join(
            [
                init,
                f"  const bool vec = {' && '.join(aligned) if aligned else 'true'};",
                f"  return stitch_ew_launch<{struct}>(f, n, vec, unroll, threads, stream);",
            ]
        )
        launcher = self.unit.launcher("ew", params, body, group.id)
        args = helper.chain_args(chain, prefix) + [f"{n}.data_ptr()" for n in out_names]
        unroll = helper.knob("unroll", self.ew_unroll)
        threads = helper.knob("threads", EW_THREADS)
        args += [f"{out_names[0]}.numel()", unroll, threads, f"_stitch_stream({out_names[0]})"]
        helper.lines.append(f"_ext.{launcher}({', '.join(args)})")
        return out_names

    def _elementwise(self, group: Group, helper: Helper) -> tuple[str, int]:
        shape = self.shape(group.tail)
        chain = build_chain(self.classifier, spec_ops(group.epilogue), shape)
        names = self._ew_call(helper, chain, group.outputs, group, "", None)
        helper.returns = names
        return ("ew_vec4_split" if group.level == 1 else "ew_vec4"), 1

    # -- GEMM through cuBLASLt, with folded or separate epilogue --
    def _gemm(self, group: Group, helper: Helper) -> tuple[str, int]:
        self.unit.use("gemm")
        self.unit.library_launcher("gemm_nested", GEMM_PARAMS, group.id)
        anchor = group.anchor
        assert anchor is not None
        args = anchor.args
        a = helper.ref(args["a"])
        b = f"{helper.ref(args['weight'])}.t()" if "weight" in args else helper.ref(args["b"])
        fold = gemm_folds(self.classifier, group)
        kwargs: list[str] = []
        chain_ops: list[ChainOp] = []
        raw = Token("raw", full=True)
        if group.level == 0:
            if args.get("bias") is not None:
                kwargs.append(f"bias={helper.ref(args['bias'])}")
            if fold.bias is not None:
                kwargs.append(f"bias={helper.ref(fold.bias)}")
            if fold.residual is not None:
                kwargs.append(f"residual={helper.ref(fold.residual)}")
            if fold.alpha:
                alpha = "1.0"
                for kind, ref in fold.alpha:
                    alpha += f" {'*' if kind == 'mul' else '/'} {helper.ref(ref)}"
                kwargs.append(f"alpha={alpha}")
            if fold.relu:
                kwargs.append("act=_STITCH_RELU")
            lt_key: Any = group.epilogue[fold.count - 1].node if fold.count else anchor.node
            rest = group.epilogue[fold.count :]
            chain_ops = spec_ops(rest)
            template = "cublaslt_fused" if fold.count or args.get("bias") is not None else "cublaslt"
        else:
            lt_key = raw
            if args.get("bias") is not None:
                chain_ops.append(ChainOp("add", [raw, args["bias"]], {}, anchor.node))
            else:
                chain_ops.append(ChainOp("identity", [raw], {}, anchor.node))
            chain_ops += spec_ops(group.epilogue)
            template = "cublaslt+ew_epilogue"
        helper.lines.append(f"out = _stitch_mm({', '.join([a, b] + kwargs)})")
        launches = self.library_epilogue(helper, group, lt_key, chain_ops)
        if launches > 1 and group.level == 0:
            template += "+ew_epilogue"
        return template, launches

    def library_epilogue(self, helper: Helper, group: Group, key: Any, chain_ops: list[ChainOp]) -> int:
        """After a library call left `key`'s value in `out`: one elementwise kernel for `chain_ops`
        (in place over `out` when `key` itself is not an output); sets the returns; gives the launches."""
        anchor = group.anchor
        assert anchor is not None
        helper.locals[key] = "out"
        names: dict[Any, str] = {key: "out"} if not isinstance(key, Token) else {}
        launches = 1
        if chain_ops:
            chain = build_chain(self.classifier, chain_ops, self.shape(anchor.node))
            outs = [n for n in group.outputs if n not in names]
            inplace = "out" if key not in group.outputs else None
            produced = self._ew_call(helper, chain, outs, group, "e_", inplace)
            names.update(zip(outs, produced, strict=True))
            launches += 1
        helper.returns = [names[n] for n in group.outputs]
        return launches

    def prologue_ops(self, group: Group, helper: Helper) -> list[ChainOp]:
        """The group's prologue as chain ops, after the conv bias it adds first (Group.prologue_bias)."""
        ops = spec_ops(group.prologue)
        conv = group.prologue_bias
        return ops if conv is None else [helper.conv_bias_op(conv, conv.node), *ops]

    # -- softmax / layernorm / reductions (and scans, emit/scan.py) with fused prologue and epilogue --
    def row_io(self, group: Group, helper: Helper) -> RowIO:
        """The fused load (prologue) and store (epilogue) functors of a row-family group; the helper
        gets `p_shape` (the input's shape) and the prologue's operands."""
        anchor = group.anchor
        assert anchor is not None
        load = self.prologue_load(group, helper)
        value_node = (
            group.trail[-1].node if group.trail else group.absorbed[-1] if group.absorbed else anchor.node
        )
        epi_chain = build_chain(
            self.classifier, spec_ops(group.epilogue), self.shape(value_node), seed=value_node
        )
        epi_result = group.epilogue[-1].node if group.epilogue else value_node
        epi = epi_functor(self.unit, epi_chain, epi_result, group.id)
        return RowIO.build(load, epi_chain, epi)

    def prologue_load(self, group: Group, helper: Helper, ops: list[ChainOp] | None = None) -> Load:
        """The group's fused load: its prologue (`ops` when the caller already wrote them with
        prologue_ops) or its input itself, as a StitchPro_* functor; the helper gets the operands
        (`p_` names) and `p_shape`, the input's shape."""
        anchor = group.anchor
        assert anchor is not None
        source = anchor.args["input"]
        ops = self.prologue_ops(group, helper) if ops is None else ops
        chain = build_chain(self.classifier, ops, self.shape(source))
        if not group.prologue:  # the kernel reads the input itself (through its strides if a view)
            chain.full = [source]
            chain.views = {0} if is_view(self.classifier, source) else set()
        rows_read_in_place(self.classifier, chain)
        result = group.prologue[-1].node if group.prologue else source
        struct = pro_functor(self.unit, chain, result, group.id)
        helper.prepare_chain(chain, "p_", "p_shape", compute_shape=True)
        return Load(
            chain=chain,
            struct=struct,
            fields=prefixed(chain.fields(), "p_"),
            init=_init(struct, "pro", chain.fields(), "p_"),
            args=helper.chain_args(chain, "p_"),
            device="p_f0" if chain.full else "p_b0",
        )

    def _row(self, group: Group, helper: Helper) -> tuple[str, int]:
        anchor = group.anchor
        assert anchor is not None
        in_shape = self.shape(anchor.args["input"])
        io = self.row_io(group, helper)
        pro_fields, epi_fields, pro_init, epi_init = io.pro_fields, io.epi_fields, io.pro_init, io.epi_init
        pro, epi, call, alloc = io.pro, io.epi, io.call, io.alloc

        if anchor.family == REDUCTION:
            dims = anchor.args["dims"]
            d0, d1 = dims[0], dims[-1]
            keep = repr((1,) * (d1 - d0 + 1)) if anchor.args["keepdim"] else "()"
            helper.lines += [
                f"outer = math.prod(p_shape[:{d0}])",
                f"red = math.prod(p_shape[{d0}:{d1 + 1}])",
                f"inner = math.prod(p_shape[{d1 + 1}:])",
                f"y_shape = p_shape[:{d0}] + {keep} + p_shape[{d1 + 1}:]",
                f"y = {alloc.format('y_shape')}",
            ]
            scale = "1.0 / red if red else float('nan')" if anchor.op == "mean" else "1.0"
            helper.lines.append(f"scale = {scale}")
            op_code = {"sum": 0, "mean": 0, "amax": 1, "amin": 2, "prod": 3}[anchor.op]
            self.unit.use("reduce")
            params = pro_fields + epi_fields + [("float*", "y"), ("int64_t", "outer"), ("int64_t", "red")]
            params += [("int64_t", "inner"), ("float", "scale")]
            body = "\n".join(
                [
                    pro_init,
                    epi_init,
                    f"  return stitch_reduce_run<{op_code}, {pro}, {epi}>(pro, epi, y, outer, red, inner, scale, knob_threads, stream);",
                ]
            )
            tail_args = ["y.data_ptr()", "outer", "red", "inner", "scale"]
            template = "reduce_rows" if math_inner_is_one(in_shape, d1) else "reduce_cols"
            saved = None
        else:
            saved = "saved" if group.save_prologue else None
            helper.lines.append(f"y = {alloc.format('p_shape')}")
            if saved:
                helper.lines.append(f"saved = {alloc.format('p_shape')}")
            if anchor.family == SOFTMAX:
                self.unit.use("softmax")
                helper.lines += [
                    "cols = p_shape[-1] if p_shape else 1",
                    "rows = math.prod(p_shape) // max(cols, 1)",
                ]
                log = "true" if anchor.op == "log_softmax" else "false"
                params = pro_fields + epi_fields + [("float*", "y"), ("float*", "saved"), ("int64_t", "rows")]
                params += [("int64_t", "cols")]
                body = "\n".join(
                    [
                        pro_init,
                        epi_init,
                        f"  return stitch_softmax_run<{log}, {pro}, {epi}>(pro, epi, y, saved, rows, cols, knob_threads, stream);",
                    ]
                )
                tail_args = ["y.data_ptr()", "saved.data_ptr()" if saved else "0", "rows", "cols"]
                template = "log_softmax_rows" if anchor.op == "log_softmax" else "softmax_rows"
            else:
                self.unit.use("layernorm")
                norm = int(anchor.args["norm_numel"])
                helper.lines += [f"cols = {norm}", "rows = math.prod(p_shape) // cols"]
                # Keep the contiguous tensors alive until the launch: a temporary's pointer would dangle.
                for key, var in (("weight", "w"), ("bias", "b")):
                    ref = anchor.args.get(key)
                    if ref is not None:
                        helper.lines += [
                            f"{var} = {helper.ref(ref)}.contiguous()",
                            f"{var}_ptr = {var}.data_ptr()",
                        ]
                    else:
                        helper.lines.append(f"{var}_ptr = 0")
                params = (
                    pro_fields + epi_fields + [("const float*", "w"), ("const float*", "b"), ("float*", "y")]
                )
                params += [("float*", "saved"), ("int64_t", "rows"), ("int64_t", "cols"), ("float", "eps")]
                body = "\n".join(
                    [
                        pro_init,
                        epi_init,
                        f"  return stitch_layernorm_run<{pro}, {epi}>(pro, epi, w, b, y, saved, rows, cols, eps, knob_threads, stream);",
                    ]
                )
                eps = repr(float(anchor.args["eps"]))
                tail_args = [
                    "w_ptr",
                    "b_ptr",
                    "y.data_ptr()",
                    "saved.data_ptr()" if saved else "0",
                    "rows",
                    "cols",
                    eps,
                ]
                template = "layernorm_rows"
        io.add_epilogue_args(helper, "y_shape" if anchor.family == REDUCTION else "p_shape")
        params += [("int", "knob_threads")]  # the block kernels' threads (0: by the row length)
        tail_args += [helper.knob("threads", 0)]
        launcher = self.unit.launcher(template.split("_")[0], params, body, group.id)
        helper.lines.append(f"_ext.{launcher}({', '.join(call + tail_args + ['_stitch_stream(y)'])})")
        helper.returns = io.returns(group, saved)
        if group.prologue:
            template += "+prologue"
        if group.epilogue:
            template += "+epilogue"
        return template, 1

    # -- BatchNorm1d-3d: double-precision statistics, then the normalisation as an elementwise kernel --
    def write_batch_norm(self, group: Group, helper: Helper) -> tuple[str, int]:
        if group.lead:  # over a channel concatenation (codegen/emit/norm_concat.py)
            return self.family_writers[BN_OF_CONCAT](self, group, helper)
        anchor = group.anchor
        assert anchor is not None
        helper.lines.append(f"x = {helper.ref(anchor.args['input'])}.contiguous()")
        operands = self.bn_statistics(group, helper, ["x"])
        ops = [ChainOp("bn_affine", [anchor.args["input"], *operands], {}, anchor.node)]
        chain = build_chain(self.classifier, ops + spec_ops(group.epilogue), self.shape(anchor.node))
        helper.locals[anchor.args["input"]] = "x"
        names = self._ew_call(helper, chain, group.outputs, group, "e_", None)
        helper.returns = names
        return ("bn_stats+ew" + ("_epilogue" if group.epilogue else "")), 3

    def bn_statistics(self, group: Group, helper: Helper, parts: list[str]) -> list[Any]:
        """Lines that leave the group's per-channel mean and scale in `mean_c` / `scale_c` (and the
        shift in `beta_c`), shaped to broadcast over the channels; returns them as chain operands.

        `parts`: the helper's names of contiguous tensors that together hold the channels in order
        (one tensor, or the parts of a channel concatenation): each part's statistics come from a
        call over its own channels, written at its channel offset.
        """
        self.unit.use("batchnorm", "elementwise")
        self.unit.library_launcher("bn_stats", BN_STATS_PARAMS, group.id)
        anchor = group.anchor
        assert anchor is not None
        mod = helper.ref(ModuleRef(anchor.args["module"]))
        module = self.classifier.root.get_submodule(anchor.args["module"])
        ones = ", 1" * (len(self.shape(anchor.node)) - 2)  # BatchNorm1d/2d/3d: (N, C), (N, C, L), ...
        threads = helper.knob("stats.threads", 0)  # 0: the statistics kernel picks by the range length
        first = parts[0]
        helper.lines += [
            f"n, hw = {first}.shape[0], math.prod({first}.shape[2:])",
            f"c = {' + '.join(f'{p}.shape[1]' for p in parts)}",
            f"stats = torch.empty(2, c, device={first}.device, dtype=torch.float32)",
            f"batch_stats = {mod}.training or {mod}.running_mean is None",
            f"update = {mod}.training and {mod}.track_running_stats and {mod}.running_mean is not None",
            "mode = (1 if batch_stats else 0) | (2 if update else 0)",
            # the statistics kernel counts the batch (no `add_(1)` kernel of PyTorch's)
            f"tracked_ptr = {mod}.num_batches_tracked.data_ptr() if update else 0",
            f"momentum = float({mod}.momentum) if update else 0.0",
            f"weight_ptr = {mod}.weight.data_ptr() if {mod}.weight is not None else 0",
            f"rm_ptr = {mod}.running_mean.data_ptr() if {mod}.running_mean is not None else 0",
            f"rv_ptr = {mod}.running_var.data_ptr() if {mod}.running_var is not None else 0",
        ]
        at = "0"
        for part in parts:
            # float32 pointers moved to the part's first channel (a null pointer stays null)
            moved = ["weight_ptr", "rm_ptr", "rv_ptr"]
            if at != "0":
                moved = [f"({p} + 4 * ({at}) if {p} else 0)" for p in moved]
            tracked = "tracked_ptr" if at == "0" else "0"  # the first part's call counts the batch
            helper.lines.append(
                f"_ext.bn_stats({part}.data_ptr(), {', '.join(moved)}, {tracked}, stats[0, {at}:].data_ptr(),"
                f" stats[1, {at}:].data_ptr(), n, {part}.shape[1], hw, float({mod}.eps), momentum, mode,"
                f" {threads}, _stitch_stream({part}))"
            )
            at = f"{part}.shape[1]" if at == "0" else f"{at} + {part}.shape[1]"
        helper.lines.append(f"mean_c, scale_c = stats[0].view(-1{ones}), stats[1].view(-1{ones})")
        mean_t, scale_t, beta_t = Token("mean_c", False), Token("scale_c", False), Token("beta_c", False)
        helper.locals.update({mean_t: "mean_c", scale_t: "scale_c", beta_t: "beta_c"})
        operands: list[Any] = [mean_t, scale_t]
        if module.bias is not None:
            helper.lines.append(f"beta_c = {mod}.bias.view(-1{ones})")
            operands.append(beta_t)
        return operands


def math_inner_is_one(shape: tuple[int, ...], last_dim: int) -> bool:
    inner = 1
    for s in shape[last_dim + 1 :]:
        inner *= s
    return inner == 1


GEMM_PARAMS: list[tuple[str, str]] = [
    ("const float*", "A"),
    ("const float*", "B"),
    ("const float*", "C"),
    ("float*", "D"),
    ("const float*", "bias"),
    ("int64_t", "m"),
    ("int64_t", "n"),
    ("int64_t", "k"),
    ("int64_t", "lda"),
    ("int64_t", "ldb"),
    ("int64_t", "ldc"),
    ("int", "transa"),
    ("int", "transb"),
    ("int64_t", "batch"),
    ("int64_t", "sa"),
    ("int64_t", "sb"),
    ("int64_t", "sc"),
    ("int64_t", "outer"),
    ("int64_t", "oa"),
    ("int64_t", "ob"),
    ("int64_t", "oc"),
    ("float", "alpha"),
    ("float", "beta"),
    ("int", "act"),
]
BN_STATS_PARAMS: list[tuple[str, str]] = [
    ("const float*", "x"),
    ("const float*", "weight"),
    ("float*", "running_mean"),
    ("float*", "running_var"),
    ("int64_t*", "tracked"),
    ("float*", "mean_out"),
    ("float*", "scale_out"),
    ("int64_t", "N"),
    ("int64_t", "C"),
    ("int64_t", "HW"),
    ("float", "eps"),
    ("float", "momentum"),
    ("int", "mode"),
    ("int", "threads"),
]
